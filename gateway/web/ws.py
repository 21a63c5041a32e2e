"""`/ws`: authenticate the handshake, then read client messages while the connection's writer drains."""

from __future__ import annotations

import asyncio
import logging

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
from ..hub.connection import Connection
from ..hub.node import Node, now_ms
from .guards import Refused, user
from .runtime import Runtime

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 2.0


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
        user_id = user(websocket)
    except Refused as refused:
        await websocket.send_denial_response(refused.response())
        return
    fmt: Format = "msgpack" if MSGPACK_SUBPROTOCOL in websocket.scope.get("subprotocols", ()) else "json"
    await websocket.accept(subprotocol=MSGPACK_SUBPROTOCOL if fmt == "msgpack" else None)

    async def send(frame: bytes | str) -> None:
        if isinstance(frame, str):
            await websocket.send({"type": "websocket.send", "text": frame})
        else:
            await websocket.send({"type": "websocket.send", "bytes": frame})

    conn = Connection(user_id, fmt, send, runtime.settings.max_pending_bytes)
    node = runtime.node
    node.attach(conn)
    writer = asyncio.create_task(conn.run_writer(), name="ws-writer")
    reader = asyncio.create_task(_read(websocket, conn, node), name="ws-reader")
    closed = asyncio.create_task(conn.closed.wait(), name="ws-closed")
    try:
        await asyncio.wait({writer, reader, closed}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (writer, reader, closed):
            task.cancel()
        await asyncio.gather(writer, reader, closed, return_exceptions=True)
        node.detach(conn)
    if conn.close_code is not None:
        try:
            await asyncio.wait_for(websocket.close(conn.close_code, "slow consumer: could not drain"), CLOSE_TIMEOUT)
        except (asyncio.TimeoutError, RuntimeError, OSError):
            pass


async def _read(websocket: WebSocket, conn: Connection, node: Node) -> None:
    while True:
        try:
            message = await websocket.receive()
        except (WebSocketDisconnect, RuntimeError):
            return
        if message["type"] == "websocket.disconnect":
            return
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
