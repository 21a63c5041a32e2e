"""permessage-deflate (RFC 7692) as the node negotiates it: compressed once, whoever reads it.

The node deflates each shared frame once and writes the same compressed bytes to every subscriber that
negotiated compression (gateway.core.wsframe). That only works if a message's compressed bytes depend on
nothing but the message: so the node always answers `server_no_context_takeover`, whatever the offer (RFC
7692 7.1.1.1 lets a server add it). It also answers `client_no_context_takeover` (7.1.1.2: the server may add
it too), so that it inflates each client message on its own and keeps no inflate state per connection.

Window sizes: the node compresses with a 32 KiB window (WINDOW_BITS), or with the smaller one a client asks
for in `server_max_window_bits` (answered with the same value; frames are then deflated once per window size
in use). An offer of 8 is declined (zlib cannot deflate with a 256-byte window): the node goes on to the
client's next offer, if any, else the connection is not compressed. `client_max_window_bits` needs no
answer: the node inflates with the largest window, which reads what any smaller one wrote. An offer with an
unknown, repeated or invalid parameter is declined, as 7.1 asks.
"""

from __future__ import annotations

from collections.abc import Sequence

from websockets.exceptions import NegotiationError
from websockets.extensions import Extension, ServerExtensionFactory
from websockets.extensions.permessage_deflate import PerMessageDeflate
from websockets.typing import ExtensionName, ExtensionParameter

from ...core.wsframe import MEM_LEVEL, SHARED_LEVEL, WINDOW_BITS

_WINDOWS = {str(bits): bits for bits in range(8, 16)}  # RFC 7692's values, without leading zeroes
_FLAGS = ("server_no_context_takeover", "client_no_context_takeover")


class SharedDeflate(ServerExtensionFactory):
    """The node's answer to a permessage-deflate offer (see the module's docstring)."""

    name = ExtensionName("permessage-deflate")

    def process_request_params(
        self, params: Sequence[ExtensionParameter], accepted_extensions: Sequence[Extension]
    ) -> tuple[list[ExtensionParameter], PerMessageDeflate]:
        if any(other.name == self.name for other in accepted_extensions):
            raise NegotiationError("permessage-deflate is already accepted")
        window = WINDOW_BITS
        asked_window = False
        seen: set[str] = set()
        for name, value in params:
            if name in seen:
                raise NegotiationError(f"{name} offered twice")
            seen.add(name)
            if name in _FLAGS:
                if value is not None:
                    raise NegotiationError(f"{name} takes no value")
            elif name == "server_max_window_bits":
                bits = _WINDOWS.get(value or "")
                if bits is None:
                    raise NegotiationError(f"server_max_window_bits={value!r}")
                if bits < 9:
                    raise NegotiationError("server_max_window_bits=8: zlib cannot deflate with a 256-byte window")
                window, asked_window = min(window, bits), True
            elif name == "client_max_window_bits":
                if value is not None and value not in _WINDOWS:
                    raise NegotiationError(f"client_max_window_bits={value!r}")
            else:
                raise NegotiationError(f"unknown parameter {name}")
        response: list[ExtensionParameter] = [(flag, None) for flag in _FLAGS]
        if asked_window:
            response.append(("server_max_window_bits", str(window)))
        extension = PerMessageDeflate(
            remote_no_context_takeover=True,
            local_no_context_takeover=True,
            remote_max_window_bits=15,
            local_max_window_bits=window,
            compress_settings={"level": SHARED_LEVEL, "memLevel": MEM_LEVEL},
        )
        return response, extension


def shared_window(extensions: Sequence[Extension]) -> int | None:
    """What the node's own link must do for these negotiated extensions: 0 no compression, else the window
    bits to deflate shared frames with; None when they are not what SharedDeflate negotiates (the
    connection then stays with the ASGI server, which compresses it itself)."""
    if not extensions:
        return 0
    if len(extensions) == 1:
        ext = extensions[0]
        if isinstance(ext, PerMessageDeflate) and ext.local_no_context_takeover and ext.remote_no_context_takeover:
            return ext.local_max_window_bits
    return None
