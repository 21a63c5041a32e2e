"""redis-py's connections with a command packed in one join.

redis-py's `pack_command` appends each argument to a growing buffer of up to 6 KB, copying the buffer each time:
the relay's publish call (about ten arguments a message, a hundred messages a cycle) spent about 10 us a message
there, more than the rest of the call. This packs the same bytes, each argument copied once. Arguments over the
cutoff (and memoryviews) stay chunks of their own, as redis-py keeps them, so a large value is not copied.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio.connection import AbstractConnection

_CUTOFF = 6000  # redis-py's buffer cutoff: larger arguments are sent as chunks of their own


class OneJoinPacking:
    """Mixed into a redis-py connection class ahead of it: `pack_command` gives the same bytes, built once."""

    encoder: Any

    def pack_command(self, *args: Any) -> list[bytes | memoryview]:
        # As redis-py does: a command name with literal arguments in it ('CONFIG GET') is split.
        if isinstance(args[0], str):
            args = tuple(args[0].encode().split()) + args[1:]
        elif b" " in args[0]:
            args = tuple(args[0].split()) + args[1:]
        encoder = self.encoder
        encode, encoding, errors = encoder.encode, encoder.encoding, encoder.encoding_errors
        out: list[bytes | memoryview] = []
        pieces: list[bytes] = [b"*%d\r\n" % len(args)]
        for arg in args:
            # The publish call's hundred arguments a cycle are bytes, str and int: those without redis-py's
            # isinstance chain (the same bytes); anything else (float, bool, memoryview) as redis-py encodes it.
            kind = type(arg)
            if kind is bytes:
                pass
            elif kind is str:
                arg = arg.encode(encoding, errors)
            elif kind is int:
                arg = b"%d" % arg
            else:
                arg = encode(arg)
            if len(arg) > _CUTOFF or isinstance(arg, memoryview):
                pieces.append(b"$%d\r\n" % len(arg))
                out.append(b"".join(pieces))
                out.append(arg)
                pieces = [b"\r\n"]
            else:
                pieces += (b"$%d\r\n" % len(arg), arg, b"\r\n")
        out.append(b"".join(pieces))
        return out


_classes: dict[type, type] = {}


def one_join(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """`connection_class` (plain, TLS or Unix socket) with its commands packed in one join."""
    cls = _classes.get(connection_class)
    if cls is None:
        name = f"OneJoin{connection_class.__name__}"
        cls = _classes[connection_class] = type(name, (OneJoinPacking, connection_class), {})
    return cls
