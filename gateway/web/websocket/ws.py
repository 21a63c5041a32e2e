"""`/ws`: authenticate the handshake (a person's token, or a cluster's key for its command feed), then hand the
connection to the node.

On the node's own socket layer the handshake never enters ASGI (gateway.web.websocket.opening): the accepted connection
is a `DirectLink` the hub writes shared frames straight to, and client messages arrive by callback, with no
coroutine per connection. Under an ASGI server (this endpoint) the same `ClientSession` runs behind a reader and
a writer task.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from ...config import Settings
from ...core.channels import BadChannel, parse_channel
from ...core.protocol import (
    MSGPACK_SUBPROTOCOL,
    BadMessage,
    Error,
    Format,
    Ping,
    Pong,
    Subscribe,
    Unsubscribe,
    decode_client,
)
from ...core.ratelimit import FrameBudget, TokenBucket
from ...core.wsframe import Frame
from ...hub.connection import CLOSE_FLOOD, CLOSE_REASONS, Connection
from ...hub.node import Node, now_ms
from ..node.logs import bind
from ..runtime import Runtime
from .socket_admission import Admitted, admit_socket

log = logging.getLogger(__name__)


class _ClientTextNotUtf8(logging.Filter):
    """uvicorn's sans-I/O websocket protocol (when the app runs under it: the ASGI fallback) logs a client's
    text message that is not UTF-8 as an ERROR with a traceback, then closes with 1007: the client's fault, told
    here in one WARNING line (the node's own link closes with 1007 and logs nothing)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.exc_info
            and isinstance(record.exc_info[1], UnicodeDecodeError)
            and str(record.msg).startswith("Invalid UTF-8")
        ):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg, record.args = "client sent a text message that is not UTF-8: closed with 1007", ()
            record.exc_info = record.exc_text = None
        return True


logging.getLogger("uvicorn.error").addFilter(_ClientTextNotUtf8())

CLOSE_TIMEOUT = 2.0
MAX_DROPPED = 1000  # messages dropped by the rate limit before the connection is closed
MAX_WAITING = 256  # requests queued behind a subscribe in flight


async def websocket_endpoint(websocket: WebSocket) -> None:
    """The handshake under an ASGI server (the node's own answers it outside ASGI: gateway.web.websocket.opening)."""
    runtime: Runtime = websocket.app.state.runtime
    admitted = await admit_socket(websocket, runtime)
    if isinstance(admitted, JSONResponse):
        await websocket.send_denial_response(admitted)
        return
    fmt: Format = "msgpack" if MSGPACK_SUBPROTOCOL in websocket.scope.get("subprotocols", ()) else "json"
    try:
        await websocket.accept(subprotocol=MSGPACK_SUBPROTOCOL if fmt == "msgpack" else None)
    except BaseException:
        admitted.released()
        raise
    conn, client = begin(runtime, admitted, fmt)
    await _serve_asgi(websocket, conn, client)


def begin(runtime: Runtime, admitted: Admitted, fmt: Format) -> tuple[Connection, ClientSession]:
    """An accepted handshake's hub connection and session, attached to the node (the link is the caller's)."""
    settings, node = runtime.settings, runtime.node
    user_id, cluster_id = admitted.user_id, admitted.cluster_id
    conn = Connection(user_id, fmt, settings.max_pending_bytes, expires=admitted.expires)
    # The lines this connection's task logs say which connection and whose it is (gateway.web.node.logs)
    conn.log_id = f"{random.getrandbits(64):016x}"  # a name for the logs, no secret: no system call for it
    bind(connection_id=conn.log_id, **({"cluster_id": cluster_id} if cluster_id else {"user_id": user_id}))
    if cluster_id:
        conn.cluster_id = cluster_id
    else:
        conn.token_id = admitted.token_id  # checked at the handshake (and kept): revoking it closes the connection
    client = ClientSession(conn, node, settings, admitted.released)
    node.attach(conn)
    return conn, client


def budget(settings: Settings) -> FrameBudget:
    """What a client may send: frames and bytes a second (past it: 4029)."""
    return FrameBudget(
        settings.max_frames_per_second,
        settings.max_bytes_per_second,
        min_byte_burst=2 * (settings.max_message_bytes + 14),  # the largest message fits, twice over
    )


def _nothing() -> None:
    pass


class ClientSession:
    """What one client says, handled as it arrives: rate limit, decode, answer. Subscribes wait on the
    database and Redis, so they run in a task, one at a time; requests that arrive meanwhile queue behind
    them, so a subscribe followed by an unsubscribe ends unsubscribed."""

    __slots__ = ("conn", "node", "limiter", "dropped", "waiting", "task", "opened", "on_end")

    def __init__(self, conn: Connection, node: Node, settings: Settings, on_end: Callable[[], None] = _nothing) -> None:
        self.conn = conn
        self.node = node
        self.on_end: Callable[[], None] | None = on_end  # called once, when the connection is gone
        rate = settings.max_messages_per_second
        self.limiter = TokenBucket(rate, 4 * rate)
        self.dropped = 0
        self.waiting: list[Subscribe | Unsubscribe] | None = None
        self.task: asyncio.Task[None] | None = None
        self.opened = time.monotonic()

    def on_message(self, data: str | bytes) -> None:
        conn = self.conn
        if not self._within_rate():
            return
        try:
            request = decode_client(data, conn.format)
        except BadMessage as exc:
            conn.reply(Error(code="bad_message", message=str(exc)))
            return
        if isinstance(request, Ping):
            conn.reply(Pong(time=now_ms(), id=request.id))
        elif self.waiting is not None:
            if len(self.waiting) >= MAX_WAITING:
                conn.reply(Error(code="rate_limited", message="too many requests waiting: slow down"))
                return
            self.waiting.append(request)
        elif isinstance(request, Unsubscribe):
            self._unsubscribe(request.channel)
        else:
            self.waiting = [request]
            self.task = asyncio.get_running_loop().create_task(self._work())

    def on_ping(self, payload: bytes) -> None:
        """A websocket ping: rate limited like messages, its pong counted against the connection's bound."""
        if self._within_rate():
            self.conn.reply_pong(payload)

    def _within_rate(self) -> bool:
        """Within the message rate (pings included); past it the message is dropped, said so now and then, and a
        client that keeps flooding is closed."""
        conn = self.conn
        if conn.close_code is not None:
            return False
        if self.limiter.allow(time.monotonic()):
            return True
        self.dropped += 1
        if self.dropped == 1 or self.dropped % 100 == 0:  # say so, without answering every flooding message
            conn.reply(Error(code="rate_limited", message="too many messages: slow down"))
        if self.dropped >= MAX_DROPPED:
            conn.close(CLOSE_FLOOD)
        return False

    async def _work(self) -> None:
        waiting = self.waiting
        try:
            while waiting:
                request = waiting.pop(0)
                if isinstance(request, Unsubscribe):
                    self._unsubscribe(request.channel)
                    continue
                try:
                    await self.node.subscribe(self.conn, request.channel, request.cursor)
                except Exception:
                    # A bug must cost this one request, never the connection's later ones: say so and go on.
                    log.exception("subscribe %r failed", request.channel[:80])
                    self.conn.tell(_failed(request.channel))
        finally:
            self.waiting = None
            self.task = None

    def _unsubscribe(self, name: str) -> None:
        try:
            parse_channel(name)
        except BadChannel as exc:
            self.conn.reply(Error(code="bad_channel", message=str(exc), channel=name[:80]))
            return
        try:
            self.node.unsubscribe(self.conn, name)
        except Exception:
            log.exception("unsubscribe %r failed", name)
            self.conn.reply(_failed(name))

    def end(self) -> None:
        """The connection is gone: stop what it started and let the node forget it."""
        if self.task is not None:
            self.task.cancel()
        self.node.detach(self.conn)
        on_end, self.on_end = self.on_end, None
        if on_end is not None:
            on_end()
        _log_closed(self.conn, time.monotonic() - self.opened)
        self.conn.unlink()  # freed now by reference counting (gateway.web.node.garbage)


def _log_closed(conn: Connection, duration: float) -> None:
    """One line per websocket. The code is ours when we closed it; else the link's, if it keeps the one it
    exchanged; None ("-" in text): the client left, or the network dropped it. Delivered: every byte the client's
    TCP acknowledged, framing included (the node's own link, on Linux); sent and frames: what went through the
    connection's own queue (snapshots, replies, catch-ups), not the live frames the hub wrote straight to the
    socket (counted node-wide only, in /metrics)."""
    code = conn.close_code if conn.close_code is not None else getattr(conn.link, "close_code", None)
    delivered = getattr(conn.link, "delivered", None)
    fields = {
        "event": "websocket_closed",
        "connection_id": conn.log_id,
        "code": code,
        "duration_ms": round(duration * 1000, 1),
        "bytes_delivered": delivered,
        "bytes_sent": conn.bytes_sent,
        "frames_sent": conn.frames_sent,
        "user_id": conn.user_id,
        "cluster_id": conn.cluster_id,
    }
    sent = (
        f"{delivered} bytes delivered"
        if delivered is not None
        else f"{conn.bytes_sent} bytes in {conn.frames_sent} frames"
    )
    log.info(
        "websocket closed: code %s after %.1f s, %s (%s)",
        "-" if code is None else code,
        duration,
        sent,
        f"user {conn.user_id}" if conn.cluster_id is None else f"cluster {conn.cluster_id}",
        extra={"fields": fields},
    )


def _failed(channel: str) -> Error:
    return Error(code="internal", message="the server failed to handle this request: try again", channel=channel[:80])


class AsgiLink:
    """The fallback link: a writer task awaits ASGI `send` for each pending frame, in order."""

    writable = False  # every frame waits in the connection's outbound for the writer task
    write_wire: Callable[[bytes], object] | None = None
    deflate = 0  # the ASGI server compresses, if it negotiated that

    def __init__(self, websocket: WebSocket) -> None:
        self.websocket = websocket
        self.closed = asyncio.Event()
        self._wake = asyncio.Event()

    def write(self, frame: Frame) -> None:
        raise AssertionError("the ASGI link is never writable directly")

    def wake(self) -> None:
        self._wake.set()

    def close(self, code: int, reason: str) -> None:
        self.closed.set()

    def ping(self, wire: bytes, token: bytes) -> None:
        pass  # the ASGI server keeps these connections alive itself

    async def run(self, conn: Connection) -> None:
        while True:
            frame = conn.take()
            if frame is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            data = frame.asgi
            if isinstance(data, str):
                await self.websocket.send({"type": "websocket.send", "text": data})
            else:
                await self.websocket.send({"type": "websocket.send", "bytes": data})


async def _serve_asgi(websocket: WebSocket, conn: Connection, client: ClientSession) -> None:
    link = AsgiLink(websocket)
    conn.link = link
    tasks = {
        asyncio.create_task(link.run(conn), name="ws-writer"),
        asyncio.create_task(_read(websocket, client), name="ws-reader"),
        asyncio.create_task(link.closed.wait(), name="ws-closed"),
    }
    link.wake()
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        client.end()
    if conn.close_code is not None:
        try:
            await asyncio.wait_for(websocket.close(conn.close_code, CLOSE_REASONS[conn.close_code]), CLOSE_TIMEOUT)
        except (TimeoutError, RuntimeError, OSError):
            pass


async def _read(websocket: WebSocket, client: ClientSession) -> None:
    while True:
        try:
            message = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return
        if message["type"] == "websocket.disconnect":
            return
        data = message.get("text")
        client.on_message(data if data is not None else message.get("bytes") or b"")
