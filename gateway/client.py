"""A Python client for the gateway's feeds: connect with a token, subscribe, iterate over messages.

    async with GatewayClient("http://127.0.0.1:8000", token) as client:
        await client.subscribe("team-jobs:7")
        async for message in client:
            ...  # Snapshot, Batch, Summary, Notice, Glow, ... (msgspec Structs from gateway.core.protocol)

It reconnects by itself with backoff and jitter and resumes every channel from its cursor (only what was
missed, no snapshot); on `resync`, or a sequence that does not follow, it subscribes again without a cursor
and yields the fresh snapshot. Snapshot pages come one by one (`page`, `final`), whatever the channel's size.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import msgspec
import websockets

from .core.protocol import (
    MSGPACK_SUBPROTOCOL,
    Error,
    Format,
    Ping,
    Pong,
    Resync,
    ServerMessages,
    Snapshot,
    Subscribe,
    Unsubscribe,
    decode_server,
)

log = logging.getLogger(__name__)

_json = msgspec.json.Encoder()
_msgpack = msgspec.msgpack.Encoder()


def websocket_url(url: str) -> str:
    """`http://host:port` (or ws://...) -> `ws://host:port/ws`."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    path = parts.path if parts.path.endswith("/ws") else parts.path.rstrip("/") + "/ws"
    return urlunsplit((scheme, parts.netloc, path, "", ""))


def _retry_hint(exc: websockets.InvalidStatus) -> float | None:
    try:
        return float(msgspec.json.decode(exc.response.body)["retry_after_ms"]) / 1000
    except (msgspec.DecodeError, KeyError, TypeError, ValueError):
        return None


@dataclass
class _Channel:
    cursor: str | None = None
    seq: int | None = None


class GatewayClient:
    def __init__(self, url: str, token: str, fmt: Format = "json", max_backoff: float = 15.0) -> None:
        self.url = websocket_url(url)
        self.token = token
        self.format: Format = fmt
        self.max_backoff = max_backoff
        self.channels: dict[str, _Channel] = {}
        self.reconnects = 0
        self._ws: websockets.ClientConnection | None = None
        self._closed = False

    async def __aenter__(self) -> GatewayClient:
        await self._connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        if self._ws is not None:
            await self._ws.close()

    async def subscribe(self, channel: str) -> None:
        self.channels.setdefault(channel, _Channel())
        await self._send(Subscribe(channel=channel, cursor=self.channels[channel].cursor))

    async def unsubscribe(self, channel: str) -> None:
        self.channels.pop(channel, None)
        await self._send(Unsubscribe(channel=channel))

    async def ping(self) -> None:
        await self._send(Ping())

    def __aiter__(self) -> AsyncIterator[ServerMessages]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[ServerMessages]:
        while not self._closed:
            assert self._ws is not None
            try:
                raw = await self._ws.recv()
            except websockets.ConnectionClosed:
                if self._closed:
                    return
                await self._reconnect()
                continue
            message = decode_server(raw, self.format)
            if self._track(message):
                yield message

    def _track(self, m: ServerMessages) -> bool:
        """Keep each channel's cursor; notice what was lost. False: not for the caller."""
        if isinstance(m, (Pong, Error)):
            return True
        channel: str | None = getattr(m, "channel", None)
        state = self.channels.get(channel) if channel is not None else None
        if state is None or channel is None:
            return True
        if isinstance(m, Resync):
            state.cursor = state.seq = None
            asyncio.get_running_loop().create_task(self._send(Subscribe(channel=channel)))
            return True
        if isinstance(m, Snapshot):
            state.cursor, state.seq = m.cursor, m.seq
            return True
        seq = getattr(m, "seq")
        if state.seq is not None and seq != state.seq + 1:
            log.warning("%s: seq %d after %d, loading it again", channel, seq, state.seq)
            state.cursor = state.seq = None
            asyncio.get_running_loop().create_task(self._send(Subscribe(channel=channel)))
            return False
        state.cursor, state.seq = getattr(m, "cursor"), seq
        return True

    async def _send(self, message: Subscribe | Unsubscribe | Ping) -> None:
        if self._ws is None:
            return
        try:
            await self._ws.send(_json.encode(message).decode() if self.format == "json" else _msgpack.encode(message))
        except websockets.ConnectionClosed:
            pass  # the read loop reconnects and subscribes everything again

    async def _connect(self) -> None:
        subprotocols = [MSGPACK_SUBPROTOCOL] if self.format == "msgpack" else None
        self._ws = await websockets.connect(
            self.url,
            additional_headers={"Authorization": f"Bearer {self.token}"},
            subprotocols=subprotocols,  # type: ignore[arg-type]
            max_size=8 << 20,
            compression=None,
        )

    async def _reconnect(self) -> None:
        delay = 0.25
        while not self._closed:
            await asyncio.sleep(delay * (0.5 + random.random()))
            try:
                await self._connect()
            except websockets.InvalidStatus as exc:
                if exc.response.status_code == 503:  # a storm: the node says when to come back
                    delay = _retry_hint(exc) or delay
                else:
                    delay = min(delay * 2, self.max_backoff)
                continue
            except (OSError, websockets.InvalidHandshake) as exc:
                log.warning("reconnect failed (%s); retrying", type(exc).__name__)
                delay = min(delay * 2, self.max_backoff)
                continue
            self.reconnects += 1
            for channel, state in self.channels.items():
                await self._send(Subscribe(channel=channel, cursor=state.cursor))
            return
