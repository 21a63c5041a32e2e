"""A node's side of the bus: pub/sub connections, subscribed only to channels with a local subscriber.

One connection to a single Redis (under Sentinel, to the primary the sentinels name when it connects); in a
Redis Cluster, one per shard that holds a subscribed channel (sharded pub/sub: SSUBSCRIBE on the shard that owns
the channel's slot), plus the classic channels of the announcements (gateway.bus.announcements).

What it hears goes to the node's handler (gateway.bus.events.BusEvents): each channel's message as it came, each
announcement decoded by its channel, and news of the links. Redis pub/sub drops messages silently while a
connection is down. redis-py would reconnect and resubscribe behind our back, so its retries are off here: a
lost connection surfaces, `BusLost` tells the node that anything may have been missed, the link reconnects with
backoff and subscribes again, and `BusRestored` has the node fill in from history what was published meanwhile.
A slot that moves to another shard unsubscribes its channels (Redis sends `sunsubscribe`): they follow the slot
to its new owner, and the move is handled as the same kind of gap.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from collections.abc import Callable

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from . import announcements, keys
from .clients import open_client
from .connection import Bus
from .errors import BusUnavailable
from .events import LINK_LOST, RESTORED, SLOT_MOVED, BusEvent, BusEvents
from .translate import REDIS_FAILURES, redis_errors

log = logging.getLogger(__name__)

_KEEPALIVE = {
    getattr(socket, name): value
    for name, value in (("TCP_KEEPIDLE", 10), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3))
    if hasattr(socket, name)
}
LIVENESS = 15.0  # seconds of silence after which a link is taken for dead (a PING goes out after a third of it)
_MESSAGES = ("message", "smessage")
_CONFIRMS = ("subscribe", "ssubscribe")


def _client(url: str, shard: tuple[str, int] | None = None) -> Redis:
    # No health_check_interval: its PING would read replies concurrently with the read loop and steal
    # subscribe confirmations. TCP keepalives notice a dead peer instead. RESP2: redis-py 8.1 hands each RESP3
    # push to a handler that formats the whole message for a debug line whatever the log level (redis-py
    # #4230), a copy of every payload on the node's busiest path; a pub/sub connection needs nothing of RESP3.
    options: dict = {"retry": Retry(NoBackoff(), 0), "socket_keepalive": True, "socket_keepalive_options": _KEEPALIVE}
    redis = open_client(url, shard=shard, **options)
    redis.connection_pool.connection_kwargs["protocol"] = 2  # set here: a URL's `?protocol=3` beats an argument
    return redis


class _Link:
    """One pub/sub connection to one server, and the channels (pub/sub names) wanted there."""

    def __init__(self, owner: Subscriber, redis: Redis, address: tuple[str, int] | None) -> None:
        self.owner = owner
        self.redis = redis
        self.address = address  # None: the single server of the URL
        self.wanted: set[str] = set()
        self.pubsub: PubSub | None = None
        self.connected = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def send_subscribe(self, names: list[str]) -> None:
        if self.pubsub is None or not self.connected.is_set():
            return  # the read loop subscribes everything wanted when it connects
        try:
            await self._send(names, subscribe=True)
        except REDIS_FAILURES:
            pass  # the read loop notices and resubscribes everything wanted

    async def send_unsubscribe(self, names: list[str]) -> None:
        if self.pubsub is None or not self.connected.is_set():
            return
        try:
            await self._send(names, subscribe=False)
        except REDIS_FAILURES:
            pass

    async def _send(self, names: list[str], subscribe: bool) -> None:
        assert self.pubsub is not None
        classic = [n for n in names if n in keys.ANNOUNCEMENTS or not self.owner.sharded]
        sharded = [n for n in names if n not in classic]
        if classic:
            await (self.pubsub.subscribe if subscribe else self.pubsub.unsubscribe)(*classic)
        for name in sharded:  # one command each: channels of several slots may not share an SSUBSCRIBE
            await (self.pubsub.ssubscribe if subscribe else self.pubsub.sunsubscribe)(name)

    async def run(self) -> None:
        """Read until cancelled; reconnect with backoff and jitter when the connection is lost."""
        delay = 0.05
        while True:
            pubsub = self.redis.pubsub()
            try:
                await pubsub.connect()
                self.pubsub = pubsub
                self.connected.set()
                self.owner.expect(self.wanted)
                await self._send(sorted(self.wanted), subscribe=True)
                delay = 0.05
                if self.owner.reconnects:
                    asyncio.get_running_loop().create_task(self.owner.restored())
                await self._read(pubsub)
            except REDIS_FAILURES as exc:
                log.warning("redis subscription lost (%s); reconnecting", type(exc).__name__)
            except Exception:  # a node's subscription must not die with an unexpected error
                log.exception("redis subscription failed; reconnecting")
            finally:
                self.connected.clear()
                self.owner.link_down()
                self.pubsub = None
                try:
                    await pubsub.aclose()
                except REDIS_FAILURES:
                    pass
            self.owner.reconnects += 1
            self.owner.handle(LINK_LOST)
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)
            await self.owner.rehome(self)

    async def _read(self, pubsub: PubSub) -> None:
        """Hand each message on; a link silent for `liveness` seconds, a PING unanswered too, is dead: a
        half-open connection (packets dropped, no FIN or RST), or a proxy or NAT that answers for a Redis gone,
        which TCP keepalives would never notice."""
        owner = self.owner
        liveness = owner.liveness
        heard = time.monotonic()
        answered = False  # the link is up once Redis has said something on it, not once TCP connected
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=False, timeout=liveness / 3)
            now = time.monotonic()
            if message is None:
                silent = now - heard
                if silent >= liveness:
                    raise ConnectionError(f"no answer from Redis for {silent:.0f} s")
                await pubsub.ping()  # its "pong" comes through this loop like any message
                continue
            heard = now
            if not answered:
                answered = True
                owner.link_up()
            kind = keys.text(message["type"])
            if kind == "pong":
                continue
            name = keys.text(message["channel"])
            if kind in _MESSAGES:
                channel = keys.channel_of(name)  # empty for an announcement's channel, which has no tag
                if channel:
                    owner.on_message(channel, message["data"])
                else:
                    owner.announced(name, message["data"])
            elif kind in _CONFIRMS:
                owner.confirm(name)
            elif kind == "sunsubscribe" and name in self.wanted:
                # Not asked for: the channel's slot moved to another shard.
                self.wanted.discard(name)
                owner.follow(name)


class Subscriber:
    def __init__(self, bus: Bus, events: BusEvents, liveness: float = LIVENESS) -> None:
        self.bus = bus
        self.liveness = liveness
        # Since when some link has been down (monotonic; None: every link connected). Down until the first
        # connects: a node that never reached Redis is not ready either.
        self.lost_since: float | None = time.monotonic()
        self.sharded = bus.cluster
        self.on_message: Callable[[str, bytes], None] = events.handle_message  # bound once: the hot path
        self.handle: Callable[[BusEvent], None] = events.handle
        self._links: dict[tuple[str, int] | None, _Link] = {}
        self._confirmed: dict[str, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.reconnects = 0
        self.moves = 0  # channels that followed their slot to another shard

    async def subscribe(self, tag: str, channel: str, timeout: float = 5.0) -> None:
        """Subscribe and wait until Redis confirms, so that nothing published afterwards can be missed;
        BusUnavailable if it does not within `timeout` (the subscription stays wanted)."""
        name = keys.pubsub(tag, channel)
        future = self._confirmed.get(name)
        if future is None or future.done() and future.exception() is not None:
            future = self._confirmed[name] = asyncio.get_running_loop().create_future()
            with redis_errors:
                link = await self._link_for(name)
            link.wanted.add(name)
            await link.send_subscribe([name])
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout)
        except TimeoutError:
            raise BusUnavailable(f"Redis did not confirm a subscription within {timeout:g} s") from None

    async def unsubscribe(self, tag: str, channel: str) -> None:
        name = keys.pubsub(tag, channel)
        future = self._confirmed.pop(name, None)
        if future is not None and not future.done():
            future.cancel()
        for link in self._links.values():
            if name in link.wanted:
                link.wanted.discard(name)
                await link.send_unsubscribe([name])

    async def run(self) -> None:
        """Keep the links running until cancelled (the announcements' link from the start)."""
        try:
            delay = 0.05
            while True:
                try:
                    link = await self._link_for(keys.MEMBERSHIPS)  # any shard will do: classic channels
                    link.wanted.update(keys.ANNOUNCEMENTS)
                    await link.send_subscribe(list(keys.ANNOUNCEMENTS))
                    break
                except REDIS_FAILURES as exc:  # a cluster not reachable yet
                    log.warning("redis unavailable (%s); retrying", type(exc).__name__)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            await asyncio.Event().wait()
        finally:
            tasks = [link.task for link in self._links.values() if link.task is not None] + list(self._tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _link_for(self, name: str) -> _Link:
        address = await self.bus.address_for(name) if self.sharded else None
        link = self._links.get(address)
        if link is None:
            redis = _client(self.bus.url, address)
            link = self._links[address] = _Link(self, redis, address)
            link.task = asyncio.get_running_loop().create_task(link.run(), name=f"bus-link-{address}")
        return link

    # -- called by the links

    def announced(self, name: str, data: bytes) -> None:
        announcement = announcements.decode(name, data)
        if announcement is not None:
            self.handle(announcement)

    def link_up(self) -> None:
        if all(link.connected.is_set() for link in self._links.values()):
            self.lost_since = None

    def link_down(self) -> None:
        if self.lost_since is None:
            self.lost_since = time.monotonic()

    def expect(self, names: set[str]) -> None:
        """A link (re)connects: each of its channels awaits a fresh confirmation."""
        loop = asyncio.get_running_loop()
        for name in names:
            future = self._confirmed.get(name)
            if future is None or future.done():
                self._confirmed[name] = loop.create_future()

    def confirm(self, name: str) -> None:
        future = self._confirmed.get(name)
        if future is not None and not future.done():
            future.set_result(None)

    def follow(self, name: str) -> None:
        """A channel's slot moved: subscribe where it lives now; what was published meanwhile is a gap."""
        self.moves += 1
        self.handle(SLOT_MOVED)
        task = asyncio.get_running_loop().create_task(self._follow(name))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _follow(self, name: str) -> None:
        delay = 0.05
        while name in self._confirmed:
            try:
                await self.bus.refresh()
                link = await self._link_for(name)
                self.expect({name})
                link.wanted.add(name)
                await link.send_subscribe([name])
                await self.restored()
                return
            except REDIS_FAILURES as exc:
                log.warning("following a moved slot failed (%s); retrying", type(exc).__name__)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def rehome(self, link: _Link) -> None:
        """After losing a shard: channels whose slot now lives elsewhere (a failover) move there."""
        if not self.sharded:
            return
        try:
            await self.bus.refresh()
            for name in list(link.wanted):
                target = await self._link_for(name)
                if target is not link:
                    link.wanted.discard(name)
                    target.wanted.add(name)
                    self.expect({name})
                    await target.send_subscribe([name])
        except REDIS_FAILURES as exc:
            log.warning("could not reload the cluster's slots (%s)", type(exc).__name__)

    async def restored(self) -> None:
        """Once Redis confirms every subscription again, anything published meanwhile can be fetched."""
        pending = [f for f in self._confirmed.values() if not f.done()]
        if pending:
            await asyncio.wait(pending, timeout=5.0)
        self.handle(RESTORED)

    async def aclose(self) -> None:
        for link in self._links.values():
            await link.redis.aclose()
