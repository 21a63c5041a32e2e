"""A websocket's opening handshake, answered by the node's own code: the request parsed once (by the HTTP
protocol, gateway.web.server.http11), checked and negotiated by websockets' sans-I/O `ServerProtocol.accept`
(the version, key and upgrade headers; permessage-deflate as gateway.web.websocket.deflate answers it; the subprotocol),
decided by the node (`Served.opener`: gateway.web.websocket.opening), then the socket handed to a `DirectLink`.
No ASGI scope, task or queue is made for it.

The handshake answerer is one `ServerProtocol` per server, never sent anything: `accept` only reads the
request and sets `extensions` and `subprotocol`, which are read at once, and the 101 is serialized here. A
protocol object per connection would be a reference cycle (its parser is a generator holding it) left to the
cyclic collector, thousands of them in a reconnect storm. A request of a form it accepted before is answered
without it (gateway.web.server.handshake).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

import httptools
from websockets.server import ServerProtocol
from websockets.typing import Subprotocol

from ...core.protocol import MSGPACK_SUBPROTOCOL
from ...core.ratelimit import FrameBudget
from ..websocket.deflate import SharedDeflate
from ..websocket.direct import DirectLink, OnLost, OnMessage, OnPing, Writer
from .handshake import Handshakes
from .limits import LINGER, error_body, response
from .served import Served

log = logging.getLogger("gateway.web.server.upgrade")
access = logging.getLogger("gateway.access")  # a line per handshake answered (the target's token redacted)
_quiet = logging.getLogger("gateway.web.server.handshake")  # websockets logs every accepted handshake at INFO
_quiet.setLevel(logging.WARNING)

_MSGPACK = Subprotocol(MSGPACK_SUBPROTOCOL)
_RETRY = [(b"retry-after", b"1")]
EARLY_SLACK = 64 << 10  # bytes a client may send before its handshake is answered, past its largest message


class Gone(Exception):
    """The client left before its handshake was answered."""


def is_websocket(headers: Sequence[tuple[bytes, bytes]]) -> bool:
    return any(name == b"upgrade" and b"websocket" in value.lower() for name, value in headers)


def answerer(compression: bool) -> ServerProtocol:
    """The server's one handshake answerer (see the module's docstring)."""
    return ServerProtocol(
        extensions=[SharedDeflate()] if compression else [],
        select_subprotocol=_pick_subprotocol,
        logger=_quiet,
    )


def _pick_subprotocol(protocol: ServerProtocol, offered: Sequence[Subprotocol]) -> Subprotocol | None:
    return _MSGPACK if _MSGPACK in offered else None  # else JSON, named or not


class Opening:
    """One websocket handshake the gate let through, for the node's code to refuse or accept."""

    __slots__ = ("scope", "subprotocol", "_upgrade")

    def __init__(self, scope: dict[str, Any], subprotocol: str | None, upgrade: Upgrade) -> None:
        self.scope = scope  # a websocket scope as ASGI has it (Starlette's HTTPConnection reads it)
        self.subprotocol = subprotocol  # the one answered: MSGPACK_SUBPROTOCOL, or None for JSON
        self._upgrade = upgrade

    @property
    def gone(self) -> bool:
        return self._upgrade.gone

    def refuse(self, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """Answer with a JSON body and close."""
        self._upgrade.refuse(status, body, headers)

    def accept(
        self,
        on_message: OnMessage,
        on_lost: OnLost,
        conn: Writer,
        on_ping: OnPing | None = None,
        budget: FrameBudget | None = None,
        message_timeout: float | None = None,
    ) -> DirectLink:
        """Send the 101 and hand the socket to a DirectLink; raises `Gone` if the client left meanwhile."""
        link = self._upgrade.accept(on_message, on_lost, conn)
        if on_ping is not None:
            link.on_ping = on_ping
        link.budget, link.message_timeout = budget, message_timeout
        self._upgrade.flush_early(link)
        return link


class Upgrade:
    """One upgrade request on its way to a link (the HTTP protocol's `upgrade` meanwhile)."""

    def __init__(
        self,
        served: Served,
        transport: asyncio.Transport,
        url: bytes,
        headers: list[tuple[bytes, bytes]],
        client: tuple[str, int] | None,
        server: tuple[str, int] | None,
        protocol: object,
    ) -> None:
        self.served = served
        self.protocol = protocol  # the HTTP protocol it came through: forgotten by the server once handed over
        self.transport = transport
        self.url = url
        self.headers = headers
        self.client, self.server = client, server
        self.buffered = bytearray()  # what the client sent before its answer: the link reads it first
        self.gone = False
        self.answered = False
        self.deflate = 0
        self.method = b"GET"
        self.response: bytes | None = None  # the 101, once websockets or a form before accepted the handshake

    def early(self, data: bytes) -> None:
        if self.answered:
            return
        self.buffered += data
        if len(self.buffered) > self.served.max_message_bytes + EARLY_SLACK:
            self.transport.abort()  # no client of the protocol sends this much unanswered

    def lost(self) -> None:
        self.gone = True
        self.protocol = None

    def begin(self) -> None:
        """Check and negotiate the handshake, then let the node's code decide, in a task of its own."""
        parsed = httptools.parse_url(self.url)
        path = unquote(parsed.path.decode("ascii", "replace"))
        served = self.served
        if path != served.ws_path or served.opener is None:
            self.refuse(404, error_body("not_found", "no websocket here"))
            return
        if served.stopping:  # its websockets are being closed with retry hints: this one goes elsewhere now
            self.refuse(503, error_body("unavailable", "this node is stopping: retry shortly", 1000), _RETRY)
            return
        if self.method != b"GET" or any(_is_body(name, value) for name, value in self.headers):
            self.refuse(400, error_body("bad_handshake", "a websocket handshake is a GET without a body"))
            return
        answer = served_handshakes(served).answer(self.url, self.headers)
        if answer.status == 500:
            self.refuse(500, error_body("internal", "unexpected extension"))
            return
        if answer.status != 101:
            self._write_and_close(answer.wire, answer.status)
            return
        self.deflate, self.response = answer.deflate, answer.wire
        scope = {
            "type": "websocket",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "scheme": "ws",
            "server": self.server,
            "client": self.client,
            "root_path": "",
            "path": path,
            "raw_path": parsed.path,
            "query_string": parsed.query or b"",
            "headers": self.headers,
            "subprotocols": _offered(self.headers),
            "state": dict(served.state),
            "app": served.app,
            "extensions": {},
        }
        served.proxy.apply(scope)
        task = asyncio.get_running_loop().create_task(self._decide(Opening(scope, answer.subprotocol, self)))
        served.tasks.add(task)
        task.add_done_callback(served.tasks.discard)

    async def _decide(self, opening: Opening) -> None:
        if self.gone:  # the client left while its handshake waited its turn: nothing to decide, nobody to tell
            self.answered = True
            return
        try:
            await self.served.opener(opening)  # type: ignore[misc]
        except Gone:
            pass
        except Exception:
            log.exception("websocket handshake failed")
            if not self.answered:
                self.refuse(500, error_body("internal", "the server failed"))
        if not self.answered:
            self.answered = True
            if not self.gone and not self.transport.is_closing():  # a client that left is no bug of ours
                log.error("the handshake was neither accepted nor refused: closed")
            self.transport.close()

    def refuse(self, status: int, body: bytes, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        self._write_and_close(response(status, body, self.served.default_headers, headers=headers), status)

    def _log(self, status: int) -> None:
        if self.served.access_log and access.isEnabledFor(logging.INFO):
            peer = f"{self.client[0]}:{self.client[1]}" if self.client else "-"
            access.info('%s - "WebSocket %s" %d', peer, self.url.decode("latin-1"), status)

    def _write_and_close(self, data: bytes, status: int) -> None:
        self._log(status)
        self.answered = True
        self.buffered = bytearray()
        if self.gone or self.transport.is_closing():
            return
        self.transport.write(data)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            asyncio.get_running_loop().call_later(LINGER, self.transport.close)
        else:
            self.transport.close()

    def accept(self, on_message: OnMessage, on_lost: OnLost, conn: Writer) -> DirectLink:
        if self.gone or self.answered or self.transport.is_closing() or self.response is None:
            raise Gone()
        self.answered = True
        self._log(101)
        self.transport.write(self.response)
        self.response = None
        link = DirectLink(self.transport, self.served.max_message_bytes, self.served.links, self.deflate)
        link.on_message, link.on_lost, link.conn = on_message, on_lost, conn
        self.served.links.add(link)
        self.served.connections.discard(self.protocol)
        self.protocol = None  # it and this upgrade referred to each other: reference counting frees both now
        self.transport.set_protocol(link)
        return link

    def flush_early(self, link: DirectLink) -> None:
        """What the client sent before its answer goes to the link first, in order."""
        early, self.buffered = bytes(self.buffered), bytearray()
        if early:
            link.data_received(early)


def served_handshakes(served: Served) -> Handshakes:
    if served.answerer is None:
        served.answerer = Handshakes(answerer(served.compression))
    handshakes: Handshakes = served.answerer
    return handshakes


def _is_body(name: bytes, value: bytes) -> bool:
    return (name == b"content-length" and value.strip() != b"0") or name == b"transfer-encoding"


def _offered(headers: Sequence[tuple[bytes, bytes]]) -> list[str]:
    found: list[str] = []
    for name, value in headers:
        if name == b"sec-websocket-protocol":
            found += [part.strip() for part in value.decode("latin-1").split(",") if part.strip()]
    return found
