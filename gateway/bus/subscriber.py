"""A node's side of the bus: one pub/sub connection, subscribed only to channels with a local subscriber.

Redis pub/sub drops messages silently while a connection is down. redis-py would reconnect and resubscribe
behind our back, so its retries are off here: a lost connection surfaces, `on_lost` tells the hub that
anything may have been missed, and the loop reconnects with backoff and subscribes again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from collections.abc import Callable

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from . import keys

log = logging.getLogger(__name__)

OnMessage = Callable[[str, bytes], None]
_KEEPALIVE = {
    getattr(socket, name): value
    for name, value in (("TCP_KEEPIDLE", 10), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3))
    if hasattr(socket, name)
}


class Subscriber:
    def __init__(
        self,
        url: str,
        on_message: OnMessage,
        on_lost: Callable[[], None],
        on_restored: Callable[[], None],
        on_control: Callable[[bytes], None] = lambda data: None,
    ) -> None:
        # No health_check_interval: its PING would read replies concurrently with the read loop and steal
        # subscribe confirmations. TCP keepalives notice a dead peer instead.
        self._redis = Redis.from_url(
            url,
            retry=Retry(NoBackoff(), 0),
            socket_keepalive=True,
            socket_keepalive_options=_KEEPALIVE,
        )
        self._on_message = on_message
        self._on_lost = on_lost
        self._on_restored = on_restored
        self._on_control = on_control
        self._wanted: set[str] = set()
        self._confirmed: dict[str, asyncio.Future[None]] = {}
        self._pubsub: PubSub | None = None
        self._connected = asyncio.Event()
        self.reconnects = 0

    async def subscribe(self, channel: str, timeout: float = 5.0) -> None:
        """Subscribe and wait until Redis confirms, so that nothing published afterwards can be missed."""
        self._wanted.add(channel)
        future = self._confirmed.get(channel)
        if future is None or future.done() and future.exception() is not None:
            future = self._confirmed[channel] = asyncio.get_running_loop().create_future()
            if self._pubsub is not None and self._connected.is_set():
                try:
                    await self._pubsub.subscribe(keys.pubsub(channel))
                except (RedisError, OSError):
                    pass  # the read loop notices and resubscribes everything wanted
        await asyncio.wait_for(asyncio.shield(future), timeout)

    async def unsubscribe(self, channel: str) -> None:
        self._wanted.discard(channel)
        future = self._confirmed.pop(channel, None)
        if future is not None and not future.done():
            future.cancel()
        if self._pubsub is not None and self._connected.is_set():
            try:
                await self._pubsub.unsubscribe(keys.pubsub(channel))
            except (RedisError, OSError):
                pass

    async def run(self) -> None:
        """Read until cancelled; reconnect with backoff and jitter when the connection is lost."""
        delay = 0.05
        while True:
            pubsub = self._redis.pubsub()
            try:
                await pubsub.connect()
                self._pubsub = pubsub
                self._connected.set()
                for channel in self._wanted:
                    future = self._confirmed.get(channel)
                    if future is None or future.done():
                        self._confirmed[channel] = asyncio.get_running_loop().create_future()
                await pubsub.subscribe(keys.CONTROL, *(keys.pubsub(c) for c in self._wanted))
                delay = 0.05
                if self.reconnects:
                    asyncio.get_running_loop().create_task(self._restored())
                await self._read(pubsub)
            except (RedisError, OSError) as exc:
                log.warning("redis subscription lost (%s); reconnecting", type(exc).__name__)
            except Exception:  # the node's only subscription must not die with an unexpected error
                log.exception("redis subscription failed; reconnecting")
            finally:
                self._connected.clear()
                self._pubsub = None
                try:
                    await pubsub.aclose()
                except (RedisError, OSError):
                    pass
            self.reconnects += 1
            self._on_lost()
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)

    async def _read(self, pubsub: PubSub) -> None:
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=False, timeout=None)
            if message is None:
                continue
            kind = message["type"]
            name = message["channel"].decode() if isinstance(message["channel"], bytes) else message["channel"]
            if name == keys.CONTROL:
                if kind == b"message" or kind == "message":
                    self._on_control(message["data"])
                continue
            channel = keys.channel_of(name)
            if kind == b"message" or kind == "message":
                self._on_message(channel, message["data"])
            elif kind in (b"subscribe", "subscribe"):
                future = self._confirmed.get(channel)
                if future is not None and not future.done():
                    future.set_result(None)

    async def _restored(self) -> None:
        """Once Redis confirms every subscription again, anything published meanwhile can be fetched."""
        pending = [f for f in self._confirmed.values() if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=5.0)
        self._on_restored()

    async def aclose(self) -> None:
        await self._redis.aclose()
