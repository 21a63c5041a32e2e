"""A gateway node's live parts: the hub, its bus subscription, and subscribing a connection to a channel.

Subscribing never races the stream: the node subscribes in Redis first (confirmed), buffers what arrives,
then either replays what the client missed since its cursor from the channel's history, or reads the
channel's state and sends a snapshot; then it releases the buffered messages newer than that.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import Callable, Iterable
from typing import cast

import asyncpg
import msgspec
from redis.exceptions import RedisError

from ..bus import history, keys
from ..bus.connection import Bus
from ..bus.subscriber import Subscriber
from ..core import envelope
from ..core.aggregate import MembershipChange
from ..core.channels import BadChannel, Channel, parse_channel
from ..core.histogram import Histogram
from ..core.model import Counts, TrajectorySummary
from ..core.protocol import Error, Snapshot, make_cursor, msgpack_to_json, parse_cursor
from ..core.relay import MAX_BATCH_BYTES, MAX_JOBS_PER_BATCH, SUBMISSION_STATE_PREFIX, SUMMARY_STATE_PREFIX
from ..core.submission import SubmissionRow
from ..core.team import ClusterStats, Presence
from ..core.wsframe import Frame, ping_frame
from ..store import queries
from .backlog import Backlog
from .connection import Connection
from .hub import Hub
from .presence import PresenceBoard
from .shared import SharedReads

log = logging.getLogger(__name__)

SNAPSHOT_TRAJECTORIES = 300  # the team channel lists the most recent few hundred, plus totals
SNAPSHOT_SUBMISSIONS = 500
GROUPS_PER_PAGE = 1_000
MAX_REPLAY = 5_000  # past this many missed messages a snapshot is cheaper than the replay
POSITION_CHECK_EVERY = 5.0  # the safety net for messages Redis dropped at the tail of a stream
MEMBERSHIP_CHECK_EVERY = 30.0
KEEPALIVE_EVERY = 20.0  # one ping to every connection; one that has not answered by the next is closed
RETRY_SUBSCRIBE = 0.2  # seconds before a failed subscribe is tried once more
MEMBER_TTL = 10.0  # a membership checked this recently is not asked again (removals revoke it at once)
STATE_WAIT = 3.0  # a team's state missing from Redis (it restarted): wait this long for the relay
_summary_decoder = msgspec.msgpack.Decoder(TrajectorySummary)
_counts_decoder = msgspec.msgpack.Decoder(Counts)
_memberships_decoder = msgspec.json.Decoder(list[MembershipChange])
_submission_decoder = msgspec.msgpack.Decoder(SubmissionRow)
_presence_decoder = msgspec.msgpack.Decoder(Presence)
_stats_decoder = msgspec.msgpack.Decoder(ClusterStats)
_ERRORS = (asyncio.TimeoutError, OSError, asyncpg.PostgresError, ConnectionError, RedisError)


def now_ms() -> int:
    return int(time.time() * 1000)


def _pages(channel: str, seq: int, cursor: str, jobs: list) -> list[Snapshot]:
    """Snapshot pages of these jobs, halved until each fits the byte bound of a batch."""
    page = Snapshot(channel=channel, seq=seq, cursor=cursor, time=0, page=0, final=False, jobs=jobs)
    if len(jobs) > 1 and len(msgspec.json.encode(page)) > MAX_BATCH_BYTES:
        half = len(jobs) // 2
        return _pages(channel, seq, cursor, jobs[:half]) + _pages(channel, seq, cursor, jobs[half:])
    return [page]


class Node:
    def __init__(
        self,
        pool: asyncpg.Pool,
        bus: Bus,
        max_subscriptions: int,
        presence: bool = True,
        keepalive: float = KEEPALIVE_EVERY,
    ) -> None:
        self.keepalive_every = keepalive
        self.pool = pool
        self.bus = bus
        self.redis = bus.redis
        self.max_subscriptions = max_subscriptions
        self.presence = PresenceBoard(bus.redis, enabled=presence)
        self.hub = Hub(on_empty=self._schedule_reconcile, on_gap=self._schedule_repair)
        self.publish_to_write = Histogram()  # /metrics: the relay's publish to this node's write, per message
        self.subscriber = Subscriber(bus, self._on_bus_message, self._bus_lost, self._bus_restored, self._control)
        self._locks: dict[str, asyncio.Lock] = {}
        self.shared = SharedReads()
        self.backlog = Backlog(
            lambda channel, first, last: history.entries(self.bus, self._tag(channel), channel, first, last)
        )
        self._channel_team: dict[str, int] = {}  # a channel's team never changes
        self._members: dict[tuple[int, int], float] = {}  # (user, team) -> when found a member
        self._redis_subscribed: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._runners: list[asyncio.Task[None]] = []
        self.connections: set[Connection] = set()
        self.per_user: dict[int, int] = {}  # open connections per user, for the per-user limit
        self.on_revocation: Callable[[bytes], None] = lambda data: None  # gateway.hub.revocations listens
        self.closed_bytes = 0  # sent by connections that have closed since
        self.closed_frames = 0
        self.slow_closes = 0
        self.catch_ups = 0  # slow consumers' channels caught up from history instead of resynced

    async def start(self) -> None:
        self._runners = [
            asyncio.create_task(self.subscriber.run(), name="bus-subscriber"),
            asyncio.create_task(self._check_positions(), name="position-check"),
            asyncio.create_task(self.presence.run(), name="presence"),
            asyncio.create_task(self._recheck_memberships(), name="membership-check"),
            asyncio.create_task(self._keepalive(), name="keepalive"),
        ]

    async def stop(self) -> None:
        tasks = [*self._runners, *self._tasks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.presence.clear()
        await self.subscriber.aclose()

    def _on_bus_message(self, channel: str, data: bytes) -> None:
        """The hub writes the message to the channel's subscribers; one it did write (not a duplicate, not held
        for a repair, not for nobody) counts toward publish-to-write latency, on the relay's clock."""
        hub = self.hub
        fanned = hub.fanout_messages
        hub.on_message(channel, data)
        if hub.fanout_messages != fanned:
            published = envelope.published_at(data)
            if published:
                self.publish_to_write.observe(max(0.0, time.time() - published))

    # -- connections

    def attach(self, conn: Connection) -> None:
        conn.on_lag = self._lagged
        self.connections.add(conn)
        self.per_user[conn.user_id] = self.per_user.get(conn.user_id, 0) + 1

    def detach(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            left = self.per_user.pop(conn.user_id, 1) - 1
            if left:
                self.per_user[conn.user_id] = left
            self.closed_bytes += conn.bytes_sent
            self.closed_frames += conn.frames_sent
            self.slow_closes += conn.close_code is not None
        for channel in list(conn.channels) + list(conn.buffering):
            self.hub.remove(conn, channel)
        for team_id in list(conn.teams_present):
            self._spawn(self.presence.remove(team_id, conn.user_id))
        conn.teams_present.clear()
        conn.channels.clear()
        conn.buffering.clear()

    def _resync(self, conn: Connection, channel: str, reason: str) -> None:
        """Tell one client to reload a channel: it is unsubscribed until it subscribes again."""
        conn.resync(channel, reason)
        self.hub.remove(conn, channel)
        self._leave_team(conn, channel)

    def _leave_team(self, conn: Connection, channel: str) -> None:
        kind, _, ident = channel.partition(":")
        if kind == "team" and int(ident) in conn.teams_present:
            conn.teams_present.discard(int(ident))
            self._spawn(self.presence.remove(int(ident), conn.user_id))

    async def subscribe(self, conn: Connection, name: str, cursor: str | None = None) -> None:
        try:
            channel = parse_channel(name)
        except BadChannel as exc:
            conn.reply(Error(code="bad_channel", message=str(exc), channel=name[:80]))
            return
        if name not in conn.channels and len(conn.channels) >= self.max_subscriptions:
            conn.reply(
                Error(
                    code="too_many_subscriptions",
                    message=f"at most {self.max_subscriptions} subscriptions per connection",
                    channel=name,
                )
            )
            return
        try:
            team_id = await self._team_of(channel)
            allowed = team_id is not None and await self._is_member(conn.user_id, team_id)
        except _ERRORS as exc:
            log.warning("subscribe %s: membership check failed: %s", name, type(exc).__name__)
            conn.reply(Error(code="unavailable", message="the channel is unavailable, try again", channel=name))
            return
        if not allowed:
            # The same answer whether it exists or not: a foreign team's ids are not revealed.
            conn.reply(Error(code="forbidden", message=f"not a member of the team of {name}", channel=name))
            return
        assert team_id is not None
        for attempt in (1, 2):
            conn.buffer(name)
            since = self.shared.mark()  # reads that start from now on are fresh enough for this subscriber
            conn.channels.add(name)
            conn.channel_teams[name] = team_id
            self.hub.add(conn, name)
            try:
                await self._reconcile(name)
                if cursor is None or not await self._resume(conn, name, cursor, since):
                    await self._send_snapshot(conn, channel, since)
                if channel.kind == "team" and channel.id not in conn.teams_present and name in conn.channels:
                    conn.teams_present.add(channel.id)  # an open view of the team: its user is online
                    await self.presence.add(channel.id, conn.user_id)
                return
            except _ERRORS as exc:
                self.unsubscribe(conn, name)
                if attempt == 1 and conn.close_code is None:
                    # Often a pooled connection that died with a Redis or PostgreSQL restart: once more, fresh.
                    log.info("subscribe %s: %s, trying again", name, type(exc).__name__)
                    await asyncio.sleep(RETRY_SUBSCRIBE)
                    continue
                log.warning("subscribe %s failed: %s", name, type(exc).__name__)
                conn.reply(Error(code="unavailable", message="the channel is unavailable, try again", channel=name))

    async def _team_of(self, channel: Channel) -> int | None:
        team_id = self._channel_team.get(channel.name)
        if team_id is None:
            team_id = await self.shared.read(
                ("team", channel.name), lambda: queries.team_of_channel(self.pool, channel)
            )
            if team_id is not None:
                if len(self._channel_team) > 100_000:  # keep what is followed: its tag is needed
                    self._channel_team = {
                        c: t
                        for c, t in self._channel_team.items()
                        if c in self.hub.subscribers or c in self._redis_subscribed
                    }
                self._channel_team[channel.name] = team_id
        return team_id

    def _tag(self, name: str) -> str:
        """The hash tag of a followed channel's keys in Redis: its team's partition's."""
        return self.bus.partitions.tag(self._channel_team[name])

    async def _is_member(self, user_id: int, team_id: int) -> bool:
        key = (user_id, team_id)
        checked = self._members.get(key)
        if checked is not None and time.monotonic() - checked < MEMBER_TTL:
            return True
        member = await self.shared.read(("member", key), lambda: queries.is_member(self.pool, user_id, team_id))
        if member:
            self._members[key] = time.monotonic()
        else:
            self._members.pop(key, None)
        return member

    def unsubscribe(self, conn: Connection, name: str) -> None:
        conn.channel_teams.pop(name, None)
        conn.channels.discard(name)
        conn.stop_buffering(name)
        self.hub.remove(conn, name)
        self._leave_team(conn, name)

    async def _keepalive(self) -> None:
        """Pings for every connection at once, instead of a timer per connection."""
        while True:
            await asyncio.sleep(self.keepalive_every)
            token = secrets.token_bytes(8)
            wire = ping_frame(token)
            for conn in list(self.connections):
                conn.link.ping(wire, token)

    # -- membership: a member removed from a team loses its subscriptions at once, on every node

    def _control(self, data: bytes) -> None:
        if data[:1] == b"{":  # a revoked session (membership changes come as a list)
            self.on_revocation(data)
            return
        try:
            changes = _memberships_decoder.decode(data)
        except msgspec.DecodeError:
            log.warning("ignored an undecodable control message")
            return
        for change in changes:
            if not change.member:
                self.revoke(change.team_id, change.user_id)

    def revoke(self, team_id: int, user_id: int) -> None:
        self._members.pop((user_id, team_id), None)
        for conn in [c for c in self.connections if c.user_id == user_id]:
            for name in [n for n, t in conn.channel_teams.items() if t == team_id]:
                self.unsubscribe(conn, name)
                conn.send_message(
                    Error(code="forbidden", message="you are no longer a member of this team", channel=name)
                )

    async def _recheck_memberships(self) -> None:
        """The safety net for a control message Redis dropped: check every live subscription now and then."""
        while True:
            await asyncio.sleep(MEMBERSHIP_CHECK_EVERY)
            stale = time.monotonic() - MEMBER_TTL
            self._members = {k: at for k, at in self._members.items() if at > stale}
            pairs = {(c.user_id, t) for c in self.connections for t in c.channel_teams.values()}
            if not pairs:
                continue
            try:
                rows = await self.pool.fetch(
                    "select u, t from unnest($1::bigint[], $2::bigint[]) as p(u, t)"
                    " where not exists (select 1 from memberships m where m.user_id = p.u and m.team_id = p.t)",
                    [u for u, _ in pairs],
                    [t for _, t in pairs],
                )
            except _ERRORS:
                continue
            for r in rows:
                self.revoke(r["t"], r["u"])

    # -- resuming from a cursor

    async def _resume(self, conn: Connection, name: str, cursor: str, since: int) -> bool:
        """Replay exactly what the client missed since `cursor`; False when the history cannot."""
        at = parse_cursor(cursor)
        if at is None:
            return False
        epoch, seq = at
        current = await self.shared.read(
            ("position", name), lambda: history.position(self.bus, self._tag(name), name), since
        )
        if current is None:
            return False
        self._anchor(name, *current)
        if current == (epoch, seq):
            await self._go_live(conn, name, seq)  # nothing missed
            return True
        if current[1] <= seq or current[1] - seq > MAX_REPLAY:
            return False
        if seq == 0:
            # The snapshot came before the channel's first message: everything from 1 on was missed, as long
            # as the relay that published it is the one that was active then.
            found = await self._entries(name, 1, current[1])
            if not history.contiguous(found, 1, current[1]) or found[0].epoch != epoch:
                return False
            missed = found
        else:
            found = await self._entries(name, seq, current[1])
            # The cursor's own message must still be there, from the same relay epoch: then what follows it
            # is exactly what the client has not seen.
            if not history.contiguous(found, seq, current[1]) or found[0].epoch != epoch:
                return False
            missed = found[1:]
        if await self._send_entries(conn, name, missed):
            await self._go_live(conn, name, current[1])
        return True

    async def _send_entries(self, conn: Connection, name: str, entries: list[history.Entry]) -> bool:
        """Send history entries in the connection's format, paced by its draining; False if it unsubscribed."""
        if conn.format == "json":
            return await self._send_frames(conn, name, (Frame(msgpack_to_json(e.msgpack), text=True) for e in entries))
        return await self._send_frames(conn, name, (Frame(e.msgpack, text=False) for e in entries))

    async def _entries(self, name: str, first: int, last: int) -> list[history.Entry]:
        return await self.shared.read(
            ("entries", name, first, last), lambda: history.entries(self.bus, self._tag(name), name, first, last)
        )

    # -- snapshots

    async def _send_snapshot(self, conn: Connection, channel: Channel, since: int) -> None:
        """A snapshot reads only what was read after `since` (when the channel began buffering): subscribers
        arriving together share those reads."""
        name = channel.name
        if channel.kind == "team":
            seq = await self._send_team_snapshot(conn, channel, since)
        else:
            seq = await self._send_jobs_snapshot(conn, channel, since)
        await self._go_live(conn, name, seq)

    async def _go_live(self, conn: Connection, name: str, seq: int, retries: int = 0) -> None:
        """Send what arrived while the snapshot or replay went out, then live frames. What the connection had
        to drop meanwhile (the client was slow) comes from the channel's history, a block at a time."""
        while (sent := await conn.release(name, seq)) is not None:
            held = conn.buffering.get(name)
            if held is None or name not in conn.channels:
                return
            last = held.skipped  # more may be dropped while the history is read: the next round sends those
            while sent < last:
                frames = await self._backlog_frames(conn, name, sent + 1, last, retries)
                if frames is None:
                    self._resync(conn, name, "slow_consumer")  # the history no longer reaches back that far
                    return
                if not await self._send_frames(conn, name, frames):
                    return
                sent += len(frames)
            seq = sent

    async def _backlog_frames(
        self, conn: Connection, name: str, first: int, last: int, retries: int
    ) -> list[Frame] | None:
        """Frames from `first` on (see `Backlog.frames`); None when the history no longer holds them."""
        while True:
            try:
                return await self.backlog.frames(name, conn.format, first, last)
            except _ERRORS as exc:
                if retries == 0:
                    raise
                retries -= 1
                # Often a pooled connection that died with a Redis restart: again, on a fresh one.
                log.info("history of %s: %s, trying again", name, type(exc).__name__)
                await asyncio.sleep(RETRY_SUBSCRIBE)

    async def _send_frames(self, conn: Connection, name: str, frames: Iterable[Frame]) -> bool:
        """Send a channel's frames to one connection, paced by its draining; False if it unsubscribed."""
        limit = conn.outbound.limit
        for frame in frames:
            if name not in conn.channels:
                return False
            conn.push(frame, force=True)
            if conn.outbound.size > limit // 2:  # batches can be big: pace by bytes, as release() does
                await conn.drained(below=limit // 4)
        return True

    def _lagged(self, conn: Connection, name: str, seq: int) -> None:
        self.catch_ups += 1
        self._spawn(self._catch_up(conn, name, seq))

    async def _catch_up(self, conn: Connection, name: str, seq: int) -> None:
        """A slow consumer fell behind on a channel after `seq` (`Connection.lag`): once it has drained, what
        it missed comes from the channel's history, then it is live again."""
        try:
            await conn.drained(below=conn.outbound.limit // 4)
            await self._go_live(conn, name, seq, retries=2)
        except _ERRORS as exc:
            log.warning("catching up %s: %s, resync", name, type(exc).__name__)
            if name in conn.buffering and conn.close_code is None:
                self._resync(conn, name, "slow_consumer")

    async def _send_team_snapshot(self, conn: Connection, channel: Channel, since: int) -> int:
        name = channel.name
        state = await self.shared.read(("state", name), lambda: self._state(name), since)
        if b"seq" not in state and not await self.redis.exists(keys.epoch(self._tag(name))):
            # Redis lost everything (a restart): the relay publishes every team's state again shortly.
            deadline = time.monotonic() + STATE_WAIT
            while b"seq" not in state and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                state = await self._state(name)
        seq = int(state.get(b"seq", 0))
        epoch = int(state[b"epoch"]) if b"epoch" in state else await self._fence(name)
        self._anchor(name, epoch, seq)
        if b"counts" in state:
            counts = _counts_decoder.decode(state[b"counts"])
            prefix = SUMMARY_STATE_PREFIX.encode()
            summaries = [_summary_decoder.decode(v) for k, v in state.items() if k.startswith(prefix)]
            total = int(state.get(b"total", len(summaries)))
        else:
            counts, summaries = await self.shared.read(
                ("team", channel.id), lambda: queries.team_state(self.pool, channel.id), since
            )
            total = len(summaries)
        summaries.sort(key=lambda s: s.updated_at.timestamp() if s.updated_at else 0.0, reverse=True)
        submission_prefix = SUBMISSION_STATE_PREFIX.encode()
        rows = [_submission_decoder.decode(v) for k, v in state.items() if k.startswith(submission_prefix)]
        rows.sort(key=lambda r: (r.created_at.timestamp() if r.created_at else 0.0, r.id), reverse=True)
        conn.send_message(
            Snapshot(
                channel=name,
                seq=seq,
                cursor=make_cursor(epoch, seq),
                time=now_ms(),
                page=0,
                final=True,
                counts=counts,
                trajectories=summaries[:SNAPSHOT_TRAJECTORIES],
                total_trajectories=total,
                submissions=rows[:SNAPSHOT_SUBMISSIONS],
                presence=_presence_decoder.decode(state[b"presence"]) if b"presence" in state else None,
                clusters=_stats_decoder.decode(state[b"clusters"]) if b"clusters" in state else None,
            )
        )
        return seq

    async def _fence(self, name: str) -> int:
        """The active relay's epoch: a cursor at seq 0 names who would publish the channel's first message."""
        value = await self.redis.get(keys.epoch(self._tag(name)))
        return int(value) if value is not None else 0

    async def _state(self, name: str) -> dict[bytes, bytes]:
        return cast(dict[bytes, bytes], await self.redis.hgetall(keys.state(self._tag(name), name)))

    async def _send_jobs_snapshot(self, conn: Connection, channel: Channel, since: int) -> int:
        # The position is read before the rows: every batch at or below it was committed before the read.
        name = channel.name
        position = await self.shared.read(
            ("position", name), lambda: history.position(self.bus, self._tag(name), name), since
        )
        epoch, seq = position or (await self._fence(name), 0)
        self._anchor(channel.name, epoch, seq)
        cursor = make_cursor(epoch, seq)
        # Frame groups with their colour, computed here so the browser never recomputes thousands.
        groups = (
            await self.shared.read(("groups", name), lambda: queries.trajectory_groups(self.pool, channel.id), since)
            if channel.kind == "trajectory"
            else []
        )
        after, page = 0, 0
        while True:
            jobs = await self.shared.read(
                ("page", name, after),
                functools.partial(queries.jobs_page, self.pool, channel, after, MAX_JOBS_PER_BATCH),
                since,
            )
            final = len(jobs) < MAX_JOBS_PER_BATCH
            parts = _pages(channel.name, seq, cursor, jobs)
            if final:
                for start in range(0, len(groups), GROUPS_PER_PAGE):  # groups travel in pages of their own
                    chunk = groups[start : start + GROUPS_PER_PAGE]
                    parts.append(
                        Snapshot(
                            channel=channel.name,
                            seq=seq,
                            cursor=cursor,
                            time=0,
                            page=0,
                            final=False,
                            jobs=[],
                            groups=chunk,
                        )
                    )
            for i, part in enumerate(parts):
                part.page, part.final = page, final and i == len(parts) - 1
                part.time = now_ms()
                conn.send_message(part)
                page += 1
                await conn.drained(below=conn.outbound.limit // 4)
            if final or channel.name not in conn.channels:
                return seq
            after = jobs[-1].id

    def _anchor(self, name: str, epoch: int, seq: int) -> None:
        """A channel's first local subscriber: its stream starts at the position the snapshot reflects, so
        that a message lost right after it is noticed as a gap. (Called right after reading the position,
        with no await in between; a stream other subscribers follow already is left alone.)"""
        stream = self.hub.streams.get(name)
        if stream is not None and stream.seq < 0:
            stream.epoch, stream.seq = epoch, seq

    # -- filling gaps from history

    def _schedule_repair(self, channel: str, first: int, last: int) -> None:
        self._spawn(self._repair(channel, first, last))

    async def _repair(self, channel: str, first: int, last: int) -> None:
        found: list[tuple[int, int, bytes]] | None = None
        try:
            entries = await history.entries(self.bus, self._tag(channel), channel, first, last)
            if history.contiguous(entries, first, last):
                found = [(e.epoch, e.seq, e.msgpack) for e in entries]
        except _ERRORS as exc:
            log.warning("history of %s unavailable: %s", channel, type(exc).__name__)
        self.hub.repaired(channel, found)

    def _bus_lost(self) -> None:
        """Messages published while the bus is away are filled in from history once it is back
        (`_bus_restored`); the subscriber counts reconnects for /metrics."""

    def _bus_restored(self) -> None:
        """Subscribed again after a reconnect: whatever was published meanwhile comes from history."""
        self.backlog.forget()  # unless Redis restarted and lost it: then sequence numbers start again
        self._spawn(self._check_soon())

    async def _check_soon(self) -> None:
        for delay in (0.0, 0.2, 1.0):
            await asyncio.sleep(delay)
            try:
                await self._check_once()
                return
            except _ERRORS:
                continue  # the next periodic check tries again

    async def _check_positions(self) -> None:
        while True:
            await asyncio.sleep(POSITION_CHECK_EVERY)
            try:
                await self._check_once()
            except _ERRORS:
                pass

    async def _check_once(self) -> None:
        channels = {c: self._tag(c) for c in self.hub.subscribers if c in self._channel_team}
        for channel, at in (await history.positions(self.bus, channels)).items():
            stream = self.hub.streams.get(channel)
            if stream is None:
                continue
            if at is None:
                if stream.seq > 0:  # the bus lost this channel's position: Redis restarted
                    self.backlog.forget()
                    self.hub.resync_channel(channel, "bus_reset")
                continue
            self.hub.check_position(channel, *at)

    # -- Redis subscriptions follow local interest

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _schedule_reconcile(self, channel: str) -> None:
        self._spawn(self._reconcile(channel))

    async def _reconcile(self, channel: str) -> None:
        lock = self._locks.setdefault(channel, asyncio.Lock())
        async with lock:
            wanted = bool(self.hub.subscribers.get(channel))
            if wanted and channel not in self._redis_subscribed:
                await self.subscriber.subscribe(self._tag(channel), channel)
                self._redis_subscribed.add(channel)
            elif not wanted and channel in self._redis_subscribed:
                self._redis_subscribed.discard(channel)
                await self.subscriber.unsubscribe(self._tag(channel), channel)
            elif wanted:
                await self.subscriber.subscribe(self._tag(channel), channel)  # returns at once when confirmed already
        if not lock.locked() and not self.hub.subscribers.get(channel):
            self._locks.pop(channel, None)
