"""`/ws`: authenticate the handshake, then read client messages while the connection's writer drains."""

from __future__ import annotations

import asyncio
import logging
import random
import time

from starlette.responses import JSONResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..core.protocol import (
    MSGPACK_SUBPROTOCOL,
    BadMessage,
    Format,
    Error,
    Ping,
    Pong,
    Subscribe,
    Unsubscribe,
    decode_client,
)
from ..core.ratelimit import TokenBucket
from ..hub.connection import CLOSE_EXPIRED, CLOSE_FLOOD, CLOSE_REASONS, Connection
from ..hub.node import Node, now_ms
from .guards import Refused, session
from .runtime import Runtime

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 2.0
MAX_DROPPED = 1000  # messages dropped by the rate limit before the connection is closed


async def websocket_endpoint(websocket: WebSocket) -> None:
    runtime: Runtime = websocket.app.state.runtime
    # Browsers always send Origin; tools usually do not.
    origin = websocket.headers.get("origin")
    if origin is not None and not runtime.origin_allowed(origin, websocket.headers.get("host", "")):
        await websocket.send_denial_response(
            JSONResponse({"error": "origin_not_allowed", "message": "this origin may not open the socket"}, 403)
        )
        return
    try:
        user_id, expires = session(websocket)
    except Refused as refused:
        await websocket.send_denial_response(refused.response())
        return
    settings = runtime.settings
    if runtime.admission is not None and not runtime.admission.allow(time.monotonic()):
        # A reconnect storm: admit at a bounded rate; the rest come back after a jittered delay.
        retry_ms = int(250 + 1000 * random.random())  # spread the retries over a second or so
        await websocket.send_denial_response(
            JSONResponse({"error": "busy", "message": "too many new connections: retry shortly", "retry_after_ms": retry_ms},
                         503, headers={"Retry-After": str(max(1, round(retry_ms / 1000)))})
        )
        return
    if sum(1 for c in runtime.node.connections if c.user_id == user_id) >= settings.max_connections_per_user:
        await websocket.send_denial_response(
            JSONResponse({"error": "too_many_connections", "message": f"at most {settings.max_connections_per_user} connections per user"}, 429)
        )
        return
    fmt: Format = "msgpack" if MSGPACK_SUBPROTOCOL in websocket.scope.get("subprotocols", ()) else "json"
    await websocket.accept(subprotocol=MSGPACK_SUBPROTOCOL if fmt == "msgpack" else None)

    async def send(frame: bytes | str) -> None:
        if isinstance(frame, str):
            await websocket.send({"type": "websocket.send", "text": frame})
        else:
            await websocket.send({"type": "websocket.send", "bytes": frame})

    conn = Connection(user_id, fmt, send, settings.max_pending_bytes)
    node = runtime.node
    node.attach(conn)
    limiter = TokenBucket(settings.max_messages_per_second, 4 * settings.max_messages_per_second)
    tasks = {
        asyncio.create_task(conn.run_writer(), name="ws-writer"),
        asyncio.create_task(_read(websocket, conn, node, limiter), name="ws-reader"),
        asyncio.create_task(conn.closed.wait(), name="ws-closed"),
        asyncio.create_task(_expire(conn, expires), name="ws-expiry"),
    }
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        node.detach(conn)
    if conn.close_code is not None:
        try:
            await asyncio.wait_for(websocket.close(conn.close_code, CLOSE_REASONS[conn.close_code]), CLOSE_TIMEOUT)
        except (asyncio.TimeoutError, RuntimeError, OSError):
            pass


async def _expire(conn: Connection, expires: float) -> None:
    """A session ends with its token: the browser renews its cookie and connects again."""
    await asyncio.sleep(max(0.0, expires - time.time()))
    conn.close(CLOSE_EXPIRED)


async def _read(websocket: WebSocket, conn: Connection, node: Node, limiter: TokenBucket) -> None:
    dropped = 0
    while True:
        try:
            message = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return
        if message["type"] == "websocket.disconnect":
            return
        if not limiter.allow(time.monotonic()):
            dropped += 1
            if dropped == 1 or dropped % 100 == 0:  # say so, without answering every flooding message
                conn.send_message(Error(code="rate_limited", message="too many messages: slow down"))
            if dropped >= MAX_DROPPED:
                conn.close(CLOSE_FLOOD)
                return
            continue
        data = message.get("text")
        if data is None:
            data = message.get("bytes") or b""
        try:
            request = decode_client(data, conn.format)
        except BadMessage as exc:
            conn.send_message(Error(code="bad_message", message=str(exc)))
            continue
        match request:
            case Subscribe(channel=channel, cursor=cursor):
                await node.subscribe(conn, channel, cursor)
            case Unsubscribe(channel=channel):
                node.unsubscribe(conn, channel)
            case Ping(id=ident):
                conn.send_message(Pong(time=now_ms(), id=ident))
