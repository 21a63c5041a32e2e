"""A gateway node's live parts: the hub, its bus subscription, and subscribing a connection to a channel.

Subscribing never races the stream: the node subscribes in Redis first (confirmed), buffers what arrives,
reads the channel's state, sends the snapshot, then releases the buffered messages newer than it.
"""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg
import msgspec
from redis.asyncio import Redis

from ..bus import keys
from ..bus.subscriber import Subscriber
from ..core.channels import BadChannel, Channel, parse_channel
from ..core.model import Counts, TrajectorySummary
from ..core.protocol import Error, Snapshot, make_cursor, parse_cursor
from ..core.relay import MAX_JOBS_PER_BATCH, SUMMARY_STATE_PREFIX
from ..store import queries
from .connection import Connection
from .hub import Hub

log = logging.getLogger(__name__)

SNAPSHOT_TRAJECTORIES = 300  # the team channel lists the most recent few hundred, plus totals
_summary_decoder = msgspec.msgpack.Decoder(TrajectorySummary)
_counts_decoder = msgspec.msgpack.Decoder(Counts)


def now_ms() -> int:
    return int(time.time() * 1000)


class Node:
    def __init__(self, pool: asyncpg.Pool, redis: Redis, redis_url: str, max_subscriptions: int) -> None:
        self.pool = pool
        self.redis = redis
        self.max_subscriptions = max_subscriptions
        self.hub = Hub(on_empty=self._schedule_reconcile)
        self.subscriber = Subscriber(redis_url, self.hub.on_message, self.hub.on_bus_lost)
        self._locks: dict[str, asyncio.Lock] = {}
        self._redis_subscribed: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._runner: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._runner = asyncio.create_task(self.subscriber.run(), name="bus-subscriber")

    async def stop(self) -> None:
        tasks = [t for t in (self._runner, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.subscriber.aclose()

    # -- connections

    def attach(self, conn: Connection) -> None:
        conn.on_resync = self._dropped

    def detach(self, conn: Connection) -> None:
        for channel in list(conn.channels) + list(conn.buffering):
            self.hub.remove(conn, channel)
        conn.channels.clear()
        conn.buffering.clear()

    def _dropped(self, conn: Connection, channels: list[str]) -> None:
        for channel in channels:
            self.hub.remove(conn, channel)

    async def subscribe(self, conn: Connection, name: str) -> None:
        try:
            channel = parse_channel(name)
        except BadChannel as exc:
            conn.send_message(Error(code="bad_channel", message=str(exc), channel=name[:80]))
            return
        if name not in conn.channels and len(conn.channels) >= self.max_subscriptions:
            conn.send_message(
                Error(code="too_many_subscriptions", message=f"at most {self.max_subscriptions} subscriptions per connection", channel=name)
            )
            return
        team_id = await queries.team_of_channel(self.pool, channel)
        if team_id is None or not await queries.is_member(self.pool, conn.user_id, team_id):
            # The same answer whether it exists or not: a foreign team's ids are not revealed.
            conn.send_message(Error(code="forbidden", message=f"not a member of the team of {name}", channel=name))
            return
        conn.buffering[name] = []
        conn.channels.add(name)
        self.hub.add(conn, name)
        try:
            await self._reconcile(name)
            await self._send_snapshot(conn, channel)
        except (asyncio.TimeoutError, OSError, asyncpg.PostgresError, ConnectionError) as exc:
            log.warning("subscribe %s failed: %s", name, type(exc).__name__)
            conn.channels.discard(name)
            conn.buffering.pop(name, None)
            self.hub.remove(conn, name)
            conn.send_message(Error(code="unavailable", message="the channel is unavailable, try again", channel=name))

    def unsubscribe(self, conn: Connection, name: str) -> None:
        conn.channels.discard(name)
        conn.buffering.pop(name, None)
        self.hub.remove(conn, name)

    # -- snapshots

    async def _send_snapshot(self, conn: Connection, channel: Channel) -> None:
        name = channel.name
        if channel.kind == "team":
            seq = await self._send_team_snapshot(conn, name)
        else:
            seq = await self._send_jobs_snapshot(conn, channel)
        if name in conn.buffering:
            conn.finish_snapshot(name, seq)

    async def _send_team_snapshot(self, conn: Connection, name: str) -> int:
        state = await self.redis.hgetall(keys.state(name))
        seq = int(state.get(b"seq", 0))
        epoch = int(state.get(b"epoch", 0))
        counts = _counts_decoder.decode(state[b"counts"]) if b"counts" in state else Counts()
        prefix = SUMMARY_STATE_PREFIX.encode()
        summaries = [_summary_decoder.decode(v) for k, v in state.items() if k.startswith(prefix)]
        summaries.sort(key=lambda s: s.updated_at.timestamp() if s.updated_at else 0.0, reverse=True)
        conn.send_message(
            Snapshot(
                channel=name,
                seq=seq,
                cursor=make_cursor(epoch, seq),
                time=now_ms(),
                counts=counts,
                trajectories=summaries[:SNAPSHOT_TRAJECTORIES],
                total_trajectories=int(state.get(b"total", len(summaries))),
            )
        )
        return seq

    async def _send_jobs_snapshot(self, conn: Connection, channel: Channel) -> int:
        # The position is read before the rows: every batch at or below it was committed before the read.
        position = await self.redis.get(keys.seq(channel.name))
        epoch, seq = (parse_cursor(position.decode()) if position else None) or (0, 0)
        cursor = make_cursor(epoch, seq)
        after, page = 0, 0
        while True:
            jobs = await queries.jobs_page(self.pool, channel, after, MAX_JOBS_PER_BATCH)
            final = len(jobs) < MAX_JOBS_PER_BATCH
            conn.send_message(
                Snapshot(channel=channel.name, seq=seq, cursor=cursor, time=now_ms(), page=page, final=final, jobs=jobs)
            )
            if final or channel.name not in conn.channels:
                return seq
            after, page = jobs[-1].id, page + 1
            await conn.drained(below=conn.outbound.limit // 4)

    # -- Redis subscriptions follow local interest

    def _schedule_reconcile(self, channel: str) -> None:
        task = asyncio.get_running_loop().create_task(self._reconcile(channel))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _reconcile(self, channel: str) -> None:
        lock = self._locks.setdefault(channel, asyncio.Lock())
        async with lock:
            wanted = bool(self.hub.subscribers.get(channel))
            if wanted and channel not in self._redis_subscribed:
                await self.subscriber.subscribe(channel)
                self._redis_subscribed.add(channel)
            elif not wanted and channel in self._redis_subscribed:
                self._redis_subscribed.discard(channel)
                await self.subscriber.unsubscribe(channel)
            elif wanted:
                await self.subscriber.subscribe(channel)  # returns at once when confirmed already
        if not lock.locked() and not self.hub.subscribers.get(channel):
            self._locks.pop(channel, None)
