"""Pub/sub on the memory bus: nodes' subscribers, and the announcements every node hears.

A message goes to the subscribers that wanted its channel when it was published, through the event loop
(`call_soon`, first in first out): as with Redis, `publish` returns before anyone has received it, and each
subscriber receives a channel's messages in publish order. While the bus is down nothing is delivered, and
messages still on their way are lost, as they are on a dropped Redis connection; subscribers' handlers hear
`BusLost`, then `BusRestored` once the bus is back. Announcements reach handlers as the typed events they are
(Redis sends them encoded, one channel per kind).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from ..errors import BusUnavailable
from ..events import LINK_LOST, RESTORED, SLOT_MOVED, Announcement, BusEvents
from .keyspace import ChannelKey, Keyspace

log = logging.getLogger(__name__)


class MemorySubscriber:
    """A node's subscriptions, telling its handler as gateway.bus.subscriber.Subscriber does."""

    def __init__(self, exchange: Exchange, events: BusEvents) -> None:
        self.exchange = exchange
        self.events = events
        self.wanted: set[ChannelKey] = set()
        self.listening = False  # run() hears the announcements
        self.reconnects = 0
        self.moves = 0
        self.lost_since: float | None = None  # the memory bus is connected from the start

    async def subscribe(self, tag: str, channel: str, timeout: float = 5.0) -> None:
        self.wanted.add((tag, channel))
        self.exchange.linked.add(self)
        if not self.exchange.up.is_set():  # confirmed once the bus is back; still wanted if that takes too long
            try:
                await asyncio.wait_for(self.exchange.up.wait(), timeout)
            except TimeoutError:
                raise BusUnavailable(f"the memory bus did not confirm a subscription within {timeout:g} s") from None

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
            self._queue(subscriber.events.handle_message, channel, data)
        return len(hearing)

    def announce(self, announcement: Announcement) -> int:
        if not self.up.is_set():
            return 0
        hearing = [s for s in self.linked if s.listening]
        for subscriber in hearing:
            self._queue(subscriber.events.handle, announcement)
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
        each connected subscriber's handler hears `BusLost`."""
        if not self.up.is_set():
            return
        self.up.clear()
        self._pending.clear()
        for subscriber in list(self.linked):
            subscriber.reconnects += 1
            subscriber.lost_since = time.monotonic()
            subscriber.events.handle(LINK_LOST)

    def restore(self) -> None:
        """Subscribers are connected again: subscriptions are confirmed, then each handler hears `BusRestored`."""
        if self.up.is_set():
            return
        self.up.set()
        for subscriber in list(self.linked):
            subscriber.lost_since = None
            self._queue(subscriber.events.handle, RESTORED)

    def move(self, tag: str) -> None:
        """The partition's slot moved to another shard: its channels follow it, each a possible gap."""
        for subscriber in list(self.linked):
            for _ in [w for w in subscriber.wanted if w[0] == tag]:
                subscriber.moves += 1
                subscriber.events.handle(SLOT_MOVED)
                self._queue(subscriber.events.handle, RESTORED)


class MemoryAnnouncements:
    """Every node whose subscriber runs hears each announcement."""

    def __init__(self, exchange: Exchange) -> None:
        self.exchange = exchange

    async def announce(self, announcement: Announcement) -> None:
        self.exchange.space.reachable()
        self.exchange.announce(announcement)
