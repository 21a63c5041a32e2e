"""The node's own websocket protocol: uvicorn's for the handshake, then a small link the hub writes to.

uvicorn's protocol runs the opening handshake and the ASGI app as usual. The app, once it has accepted a
connection, may hand it over through `scope["extensions"]["gateway.direct"]`: the transport then gets a
`DirectLink` as its protocol, and the ASGI coroutine, its task, its queue and the handshake's request end.
What stays per connection is the link (a few slots), the uvloop transport and the hub's `Connection`.

The hub writes each shared, pre-framed message with one `transport.write`; a peer that stops reading makes
the transport call `pause_writing`, and frames then wait in the connection's bounded outbound until
`resume_writing`. Client messages are parsed as they arrive and handed to a callback: no coroutine waits
on a connection's reads. Any app that does not ask for the extension gets plain ASGI, unchanged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from uvicorn.protocols.utils import ClientDisconnected
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.http11 import Request

from ..core.wsframe import OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT, PING, Frame, FrameReader, ProtocolError
from ..core.wsframe import build, close_frame

log = logging.getLogger(__name__)

EXTENSION = "gateway.direct"
CLOSE_TIMEOUT = 2.0  # a peer that does not answer our close frame (or never drains) is cut off after this

OnMessage = Callable[[str | bytes], None]
OnLost = Callable[[], None]


class DirectLink(asyncio.Protocol):
    """A handed-over websocket connection: writes shared frames, reads client messages, closes cleanly."""

    __slots__ = (
        "transport", "writable", "write_wire", "reader", "on_message", "on_lost", "conn", "connections",
        "closing", "awaiting_pong", "_abort",
    )  # fmt: skip

    def __init__(self, transport: asyncio.Transport, max_size: int, connections: set[Any]) -> None:
        self.transport = transport
        self.writable = not transport.is_closing()
        self.write_wire = transport.write
        self.reader = FrameReader(max_size)
        self.on_message: OnMessage = _ignore
        self.on_lost: OnLost = _nothing
        self.conn: Writer = _NoWriter()  # the hub's connection: told when the socket pauses and resumes
        self.connections = connections  # uvicorn's: a graceful shutdown calls `shutdown` on each
        self.closing = False
        self.awaiting_pong = False
        self._abort: asyncio.TimerHandle | None = None

    # -- the hub's side (gateway.hub.connection.Link)

    def write(self, frame: Frame) -> None:
        self.transport.write(frame.wire)

    def wake(self) -> None:
        pass  # the transport calls resume_writing when it can take more

    def close(self, code: int, reason: str = "") -> None:
        """Send a close frame and wait for the peer's (closing the socket with unread input would reset it,
        and the peer could lose our close frame); a peer that never answers is cut off."""
        if self.closing:
            return
        self.closing = True
        self.writable = False
        self.conn.paused()
        if self.transport.is_closing():
            return
        self.transport.write(close_frame(code, reason))
        self._abort = asyncio.get_running_loop().call_later(CLOSE_TIMEOUT, self.transport.abort)

    def ping(self) -> None:
        """Keepalive: a peer that has not answered the last ping by the next one is gone."""
        if self.closing:
            return
        if self.awaiting_pong:
            self.close(1011, "keepalive ping timeout")
            return
        self.awaiting_pong = True
        self.transport.write(PING)

    # -- uvicorn's side

    def shutdown(self) -> None:
        self.close(1012, "server restarting: connect again")

    # -- the transport's side

    def data_received(self, data: bytes) -> None:
        error: ProtocolError | None = None
        try:
            messages = self.reader.feed(data)
        except ProtocolError as exc:
            messages, error = exc.messages, exc  # what came before the broken frame is handled first
        if not self._dispatch(messages) or error is None:
            return
        if self.closing:
            self.transport.abort()
        else:
            self.close(error.code, str(error))

    def _dispatch(self, messages: list[tuple[int, bytes]]) -> bool:
        """Handle the client's messages in order; False once the peer's close frame has come."""
        for opcode, payload in messages:
            if opcode == OP_CLOSE:
                self._closed_by_peer(payload)
                return False
            if self.closing:
                continue  # only the peer's close frame matters now
            if opcode == OP_TEXT:
                try:
                    text = payload.decode()
                except UnicodeDecodeError:
                    self.close(1007, "text message is not UTF-8")
                    continue
                self.on_message(text)
            elif opcode == OP_BINARY:
                self.on_message(payload)
            elif opcode == OP_PING:
                self.transport.write(build(OP_PONG, payload))
            elif opcode == OP_PONG:
                self.awaiting_pong = False
        return True

    def _closed_by_peer(self, payload: bytes) -> None:
        if not self.closing:  # the peer began: answer with its code
            self.closing = True
            self.writable = False
            self.conn.paused()
            code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1000
            self.transport.write(close_frame(code if code not in (1005, 1006, 1015) else 1000))
        self.transport.close()

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def pause_writing(self) -> None:
        self.writable = False
        self.conn.paused()

    def resume_writing(self) -> None:
        if not self.closing:
            self.writable = True
            self.conn.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.writable = False
        self.closing = True
        self.conn.paused()
        self.connections.discard(self)
        if self._abort is not None:
            self._abort.cancel()
            self._abort = None
        self.on_lost()


class Writer(Protocol):
    """The hub's side of a link (gateway.hub.connection.Connection)."""

    def flush(self) -> None: ...

    def paused(self) -> None: ...


class _NoWriter:
    def flush(self) -> None:
        pass

    def paused(self) -> None:
        pass


def _ignore(data: str | bytes) -> None:
    pass


def _nothing() -> None:
    pass


class DirectProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O websocket protocol with the `gateway.direct` extension (`--ws` takes this class)."""

    adopted: DirectLink | None = None

    def handle_connect(self, event: Request) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)  # absent when the handshake itself was refused
        # Shared frames are plain frames: a connection that negotiated compression stays on ASGI.
        if scope is not None and "Sec-WebSocket-Extensions" not in self.response.headers:
            scope["extensions"][EXTENSION] = self.adopt

    def adopt(self, on_message: OnMessage, on_lost: OnLost, conn: Writer) -> DirectLink:
        """Hand the accepted connection over to a DirectLink (call right after accepting, before any await)."""
        if not self.handshake_complete or self.close_sent or self.disconnected:
            raise ClientDisconnected()
        link = DirectLink(self.transport, self.config.ws_max_size, self.connections)
        link.on_message, link.on_lost, link.conn = on_message, on_lost, conn
        self.stop_keepalive()  # the node pings every link at once instead of a timer per connection
        self.connections.discard(self)
        self.connections.add(link)  # type: ignore[arg-type]  # uvicorn only calls shutdown() on these
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()
        self.transport.set_protocol(link)
        self.adopted = link
        # Whatever the client sent before the handover goes to the link first, in order.
        while not self.queue.empty():
            event = self.queue.get_nowait()
            if event["type"] == "websocket.receive":
                on_message(event.get("text") or event.get("bytes") or b"")
        leftover = bytes(self.conn.reader.buffer)
        if leftover:
            link.data_received(leftover)
        return link

    async def run_asgi(self) -> None:
        try:
            result = await self.app(self.scope, self.receive, self.send)
        except ClientDisconnected:
            pass
        except BaseException:
            self.logger.exception("Exception in ASGI application\n")
            self.send_500_response()
        else:
            if not self.handshake_complete:
                self.logger.error("ASGI callable returned without completing handshake.")
                self.send_500_response()
            elif result is not None:
                self.logger.error("ASGI callable should return None, but returned '%s'.", result)
        if self.adopted is None and self.close_timer is None:
            self.transport.close()
