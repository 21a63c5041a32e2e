"""Pub/sub on the memory bus: nodes' subscribers, and the membership channel every node hears.

A message goes to the subscribers that wanted its channel when it was published, through the event loop
(`call_soon`, first in first out): as with Redis, `publish` returns before anyone has received it, and each
subscriber receives a channel's messages in publish order. While the bus is down nothing is delivered, and
messages still on their way are lost, as they are on a dropped Redis connection; subscribers hear `on_lost`,
then `on_restored` once the bus is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from ..subscriber import OnMessage
from .keyspace import ChannelKey, Keyspace

log = logging.getLogger(__name__)


class MemorySubscriber:
    """A node's subscriptions, with the callbacks of gateway.bus.subscriber.Subscriber."""

    def __init__(
        self,
        exchange: Exchange,
        on_message: OnMessage,
        on_lost: Callable[[], None],
        on_restored: Callable[[], None],
        on_membership: Callable[[bytes], None] = lambda data: None,
    ) -> None:
        self.exchange = exchange
        self.on_message = on_message
        self.on_lost = on_lost
        self.on_restored = on_restored
        self.on_membership = on_membership
        self.wanted: set[ChannelKey] = set()
        self.listening = False  # run() hears the membership channel
        self.reconnects = 0
        self.moves = 0
        self.lost_since: float | None = None  # the memory bus is connected from the start

    async def subscribe(self, tag: str, channel: str, timeout: float = 5.0) -> None:
        self.wanted.add((tag, channel))
        self.exchange.linked.add(self)
        if not self.exchange.up.is_set():  # confirmed once the bus is back; still wanted if that takes too long
            await asyncio.wait_for(self.exchange.up.wait(), timeout)

    async def unsubscribe(self, tag: str, channel: str) -> None:
        self.wanted.discard((tag, channel))

    async def run(self) -> None:
        self.exchange.linked.add(self)
        self.listening = True
        try:
            await asyncio.Event().wait()
        finally:
            self.listening = False
            self.exchange.linked.discard(self)

    async def aclose(self) -> None:
        self.exchange.linked.discard(self)


class Exchange:
    def __init__(self, space: Keyspace) -> None:
        self.space = space
        self.linked: set[MemorySubscriber] = set()  # those with a connection (a subscription, or running)
        self.up = asyncio.Event()
        self.up.set()
        self._pending: deque[tuple[Callable[..., None], tuple[object, ...]]] = deque()  # callbacks, their arguments
        self._scheduled = False

    def publish(self, tag: str, channel: str, data: bytes) -> int:
        """Queue `data` for every subscriber of the channel; how many there are."""
        if not self.up.is_set():
            return 0  # the subscribers' connections are down: nobody hears it
        hearing = [s for s in self.linked if (tag, channel) in s.wanted]
        for subscriber in hearing:
            self._queue(subscriber.on_message, channel, data)
        return len(hearing)

    def publish_membership(self, data: bytes) -> int:
        if not self.up.is_set():
            return 0
        hearing = [s for s in self.linked if s.listening]
        for subscriber in hearing:
            self._queue(subscriber.on_membership, data)
        return len(hearing)

    def _queue(self, callback: Callable[..., None], *args: object) -> None:
        self._pending.append((callback, args))
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._deliver)

    def _deliver(self) -> None:
        self._scheduled = False
        while self._pending:
            callback, args = self._pending.popleft()
            try:
                callback(*args)
            except Exception:  # one subscriber's failure must not hold back the others' messages
                log.exception("a memory bus subscriber's callback %s failed", getattr(callback, "__name__", callback))

    async def delivered(self) -> None:
        """Wait until every message published so far, and news of the bus, has reached its subscribers."""
        while self._scheduled:
            await asyncio.sleep(0)

    # -- what tests make happen

    def lose(self) -> None:
        """Subscribers' connections dropped: what was on its way is lost, and what is published until `restore`;
        each connected subscriber hears `on_lost`."""
        if not self.up.is_set():
            return
        self.up.clear()
        self._pending.clear()
        for subscriber in list(self.linked):
            subscriber.reconnects += 1
            subscriber.lost_since = time.monotonic()
            subscriber.on_lost()

    def restore(self) -> None:
        """Subscribers are connected again: subscriptions are confirmed, then each hears `on_restored`."""
        if self.up.is_set():
            return
        self.up.set()
        for subscriber in list(self.linked):
            subscriber.lost_since = None
            self._queue(subscriber.on_restored)

    def move(self, tag: str) -> None:
        """The partition's slot moved to another shard: its channels follow it, each a possible gap."""
        for subscriber in list(self.linked):
            for _ in [w for w in subscriber.wanted if w[0] == tag]:
                subscriber.moves += 1
                subscriber.on_lost()
                self._queue(subscriber.on_restored)


class MemoryMembership:
    """The membership channel: every node whose subscriber runs hears each payload."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange

    async def publish(self, payload: bytes) -> None:
        self.exchange.space.reachable()
        self.exchange.publish_membership(payload)
