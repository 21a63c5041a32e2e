"""Run the relays: hold a partition's lock, tail its outbox rows, publish each cycle's batches.

Teams are split over partitions (`GATEWAY_PARTITIONS`, one by default). Each partition has one active relay
at a time, the holder of its advisory lock. With one partition, one relay process is active and the others
stand by on the lock. With several, the live relay processes share them out: each holds about its share
and hands extras over when more relays join; the partitions of a relay that dies are taken by the others.

A lock lives on a dedicated direct connection (a pool would release it on reset) with TCP keepalives, and
is checked before every publish. Every takeover takes a new epoch and raises the partition's fence to it,
so a relay that lost its lock cannot publish after its successor has started.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

import asyncpg
import msgspec
from redis.exceptions import RedisError

from ..bus import keys
from ..bus.connection import Bus
from ..bus.publisher import Fenced, Publisher
from ..config import Settings
from ..core import channels
from ..core.aggregate import Change, MembershipChange, SubmissionChange
from ..core.finish import SETTLE, Wave
from ..core.relay import Publication, RelayCore, batch_delay
from ..core.team import ClusterStats, Presence
from ..store.outbox import Blocker, OutboxReader
from .extras import TeamExtras
from .metrics import Endpoint, Exporter, PartitionFigures, RelayCollector

log = logging.getLogger(__name__)

LOCK_KEY = 0x72656C6179  # "relay": partition k's lock is LOCK_KEY + k
MEMBER = "gateway-relay"  # the application_name of each relay process's own connection: PostgreSQL counts them
SHARE_EVERY = 0.5  # how often a relay looks at its share of the partitions
IDLE_POLL = 0.5  # asleep, the fallback when a wake-up is missed
SECOND_LOOK = 0.05  # just fallen asleep: when to look again for a commit that raced the flag
BUSY_POLL = 0.005  # awake, between polls that found nothing
LINGER = 0.2  # stay awake this long after the last change before sleeping...
STEADY_GAP = 0.02  # ...but only while changes come this close together: slower, NOTIFY costs writers little
HELD_BACK_LOG_AFTER = 2.0
LOCK_CHECK_TIMEOUT = 2.0
# The lock's session is proven alive before a publish unless it was this recently: a round trip saved per cycle
# when changes come one by one. A relay that lost its lock meanwhile is still stopped by the Redis fence.
LOCK_PROOF_AGE = 0.5
PRUNE_EVERY = 60.0
_membership_encoder = msgspec.json.Encoder()
_KEEPALIVE = {"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "2", "tcp_keepalives_count": "3"}


class LostLock(Exception):
    pass


class Relay:
    """One relay process: serves the partitions it holds."""

    def __init__(
        self,
        database_url: str,
        redis_url: str,
        history_length: int = 12_000,
        history_ttl: int = 3600,
        retention: float = 900.0,
        job_retention: float = 24 * 3600.0,
        presence: bool = True,
        metrics: bool = True,
        cluster: bool = False,
        partitions: int = 1,
        finish_settle: float = SETTLE,
        metrics_endpoint: Endpoint | None = None,
    ) -> None:
        self.database_url = database_url
        self.redis_url = redis_url
        self.history_length = history_length
        self.history_ttl = history_ttl
        self.retention = retention  # outbox rows are kept this long after they were published
        self.job_retention = job_retention  # a job is listed this long after its last change
        self.presence = presence
        self.metrics = metrics
        self.cluster = cluster
        self.count = partitions
        self.finish_settle = finish_settle  # seconds with no active job before a trajectory's work counts as finished
        self.serving: dict[int, PartitionRelay] = {}
        self.figures: dict[int, PartitionFigures] = {}  # per partition this process has served: its /metrics
        self.metrics_endpoint = metrics_endpoint  # None: no endpoint of its own (the demo's node exports them)

    @classmethod
    def from_settings(cls, settings: Settings, metrics_endpoint: Endpoint | None = None) -> Relay:
        """The relay `gateway relay` and `gateway demo` run, as the environment configures it."""
        return cls(
            settings.database_url,
            settings.redis_url,
            history_length=settings.history_length,
            retention=settings.outbox_retention,
            job_retention=settings.job_retention,
            presence=not settings.single_user,
            metrics=not settings.local,
            cluster=settings.redis_cluster,
            partitions=settings.partitions,
            finish_settle=settings.finish_settle,
            metrics_endpoint=metrics_endpoint,
        )

    async def run(self) -> None:
        bus = Bus(self.redis_url, self.cluster, self.count)
        exporter = Exporter(self.metrics_endpoint, RelayCollector(self.figures)) if self.metrics_endpoint else None
        try:
            if exporter is not None:
                await exporter.start()
            if self.count == 1:
                await PartitionRelay(self, bus, 0).run()
            else:
                await self._share(bus)
        finally:
            if exporter is not None:
                await exporter.stop()
            await bus.aclose()

    async def _share(self, bus: Bus) -> None:
        """Hold about 1/N of the partitions (N live relays, as PostgreSQL counts their connections): take free
        ones while below the share, hand extras over (stop serving, unlock) while above it."""
        tasks: dict[int, asyncio.Task[None]] = {}
        member: asyncpg.Connection | None = None
        delay = 0.2
        try:
            while True:
                for p in [p for p, t in tasks.items() if t.done()]:
                    del tasks[p]
                    self.serving.pop(p, None)
                try:
                    if member is None or member.is_closed():
                        member = await asyncpg.connect(self.database_url, server_settings={"application_name": MEMBER})
                    relays = await member.fetchval(
                        "select count(*) from pg_stat_activity where application_name = $1 and datname = current_database()",
                        MEMBER,
                    )
                    share = -(-self.count // max(1, relays))
                    for p in sorted(tasks)[share:]:
                        log.info("handing partition %d over (%d relays share %d partitions)", p, relays, self.count)
                        tasks.pop(p).cancel()
                        self.serving.pop(p, None)
                    if len(tasks) < share:
                        await self._take(bus, member, tasks, share)
                    delay = 0.2
                    await asyncio.sleep(SHARE_EVERY)
                except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    log.warning("relay cannot reach PostgreSQL (%s); retrying", type(exc).__name__)
                    member = None
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            if member is not None:
                member.terminate()

    async def _take(
        self, bus: Bus, member: asyncpg.Connection, tasks: dict[int, asyncio.Task[None]], share: int
    ) -> None:
        held = {
            r["key"] - LOCK_KEY
            for r in await member.fetch(
                "select (classid::bigint << 32) | objid::bigint as key from pg_locks where locktype = 'advisory'"
                " and objsubid = 1 and granted and database = (select oid from pg_database where datname = current_database())"
            )
        }
        free = [p for p in range(self.count) if p not in held and p not in tasks]
        random.shuffle(free)  # relays starting together do not all reach for the same one
        for p in free[: share - len(tasks)]:
            lock_conn = await _lock_connection(self.database_url)
            if not await lock_conn.fetchval("select pg_try_advisory_lock($1)", LOCK_KEY + p):
                lock_conn.terminate()
                continue
            relay = self.serving[p] = PartitionRelay(self, bus, p)
            tasks[p] = asyncio.create_task(relay.serve_once(lock_conn), name=f"relay-partition-{p}")


class PartitionRelay:
    """The active relay of one partition while its process holds the partition's lock."""

    def __init__(self, process: Relay, bus: Bus, partition: int) -> None:
        self.process = process
        self.bus = bus
        self.partition = partition
        self.tag = bus.partitions.tags[partition]
        self._wake = asyncio.Event()
        self._asleep = False  # what relay_wakeup says of this partition: writers NOTIFY while it is set
        self.published = 0
        self.figures = process.figures.setdefault(partition, PartitionFigures())
        self._stats_at = 0.0
        self._lock_proven = 0.0  # when the lock's session last answered
        self._blocker: Blocker | None = None

    async def run(self) -> None:
        """Stand by, take over, serve; after losing the lock or the database, stand by again."""
        delay = 0.2
        while True:
            try:
                lock_conn = await _lock_connection(self.process.database_url)
                if not await lock_conn.fetchval("select pg_try_advisory_lock($1)", LOCK_KEY + self.partition):
                    log.info("another relay is active; standing by")
                    await lock_conn.execute("select pg_advisory_lock($1)", LOCK_KEY + self.partition)
                await self._session(lock_conn)
                return
            except (TimeoutError, LostLock, Fenced, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("relay stopped serving (%s: %s); standing by again", type(exc).__name__, exc)
            except Exception:  # a relay must outlive whatever a broken connection throws: stand by, try again
                log.exception("relay stopped serving on an unexpected error; standing by again")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def serve_once(self, lock_conn: asyncpg.Connection) -> None:
        """Serve while the lock holds; on losing it, end (the process may take the partition again)."""
        try:
            await self._session(lock_conn)
        except (TimeoutError, LostLock, Fenced, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            log.warning("partition %d: relay stopped serving (%s: %s)", self.partition, type(exc).__name__, exc)
        except Exception:
            log.exception("partition %d: relay stopped serving on an unexpected error", self.partition)

    async def _session(self, lock_conn: asyncpg.Connection) -> None:
        try:
            epoch = await lock_conn.fetchval("select nextval('relay_epochs')")
            log.info("relay active for partition %d, epoch %d", self.partition, epoch)
            await self._serve(lock_conn, epoch)
        finally:
            lock_conn.terminate()

    async def _serve(self, lock_conn: asyncpg.Connection, epoch: int) -> None:
        conn = await asyncpg.connect(
            self.process.database_url, server_settings={"application_name": "gateway-relay-outbox"}
        )
        try:
            await conn.add_listener("job_changes", lambda *_: self._wake.set())
            await conn.execute(
                "insert into relay_wakeup (partition) values ($1) on conflict do nothing", self.partition
            )
            if self.partition == 0:  # fewer partitions than before: their rows would have writers NOTIFY for nobody
                await conn.execute("delete from relay_wakeup where partition >= $1", self.bus.partitions.count)
            publisher = Publisher(self.bus, self.tag, epoch, self.process.history_length, self.process.history_ttl)
            await _retry_redis(publisher.take_over)
            reader = OutboxReader(conn, self.partition, self.bus.partitions.count)
            self.extras = TeamExtras(self.bus.redis, self.process.presence, self.process.metrics, reader.mine)
            core = RelayCore(epoch, self.process.finish_settle)
            self.figures.serving(core)
            core.load(await reader.load(await _retry_redis(publisher.relay_cursor)))
            core.load_submissions(reader.submissions.values())
            await self._restore_waves(conn, reader, core)
            log.info(
                "partition %d: state loaded (%d trajectories), reading from %s",
                self.partition,
                sum(len(t.trajectories) for t in core.aggregates.teams.values()),
                reader.position,
            )
            await self._loop(lock_conn, conn, reader, core, publisher)
        finally:
            self.figures.stopped()
            conn.terminate()

    async def _loop(
        self,
        lock_conn: asyncpg.Connection,
        conn: asyncpg.Connection,
        reader: OutboxReader,
        core: RelayCore,
        publisher: Publisher,
    ) -> None:
        held_since: float | None = None
        last_held_log = 0.0
        last_change = time.monotonic()
        gap = 1.0  # how far apart changes have come lately (a moving average), in seconds
        published_at: deque[tuple[float, str]] = deque()
        last_prune = time.monotonic()
        await self._sleeping(conn, False)
        while True:
            if self._asleep:
                self._wake.clear()  # writers still NOTIFY: a commit from now on wakes the next wait
            result = await reader.read()
            if result.changes:
                unknown = core.unknown_trajectories(result.changes)
                if unknown:
                    for row in await conn.fetch(
                        "select id, team_id, name from trajectories where id = any($1::bigint[])", list(unknown)
                    ):
                        core.add_trajectory(row["id"], row["team_id"], row["name"])
                core.apply(result.changes, time.monotonic())
                await self._record_waves_started(conn, core)
            now = time.monotonic()
            await self._publish(lock_conn, conn, core, publisher, now, reader.position if result.changes else None)
            memberships = core.take_memberships()
            if memberships:
                await _retry_redis(
                    lambda: self.bus.redis.publish(keys.CONTROL, _membership_encoder.encode(memberships))  # noqa: B023  (called at once)
                )
            if result.changes:
                self._observe_published(result.changes)
            if now - self._stats_at >= 1.0:
                self._stats_at = now
                await self._write_stats(publisher, core, held_since, now)
            if result.changes:
                published_at.append((now, reader.position))

            if now - last_prune > min(PRUNE_EVERY, self.process.retention / 2, self.process.job_retention / 4):
                last_prune = now
                await self._prune(conn, published_at, now)
                if self.partition == 0:  # one sweep for all: it changes jobs, whose changes reach each partition
                    await self._sweep(conn)

            if result.held_back:
                held_since = held_since or now
                if now - held_since > HELD_BACK_LOG_AFTER and now - last_held_log > 10.0:
                    last_held_log = now
                    blocker = self._blocker = await reader.blocker(result.horizon)
                    if blocker is not None:
                        log.warning(
                            "relay held back %.1fs by open transaction xid=%d pid=%d (%s, open %.1fs): %s",
                            now - held_since,
                            blocker.xid,
                            blocker.pid,
                            blocker.state,
                            blocker.age_seconds,
                            blocker.query,
                        )
            else:
                held_since = None
                self._blocker = None
            self.figures.held_since = held_since

            if result.full:
                continue
            if result.changes or result.held_back:
                gap = 0.8 * gap + 0.2 * min(now - last_change, 1.0)
                last_change = now
                if self._asleep and gap < STEADY_GAP:
                    await self._sleeping(conn, False)  # busy: poll, and spare the writers their NOTIFY
            delay = batch_delay(len(result.changes))
            if result.held_back and held_since is not None:
                # Back off while an open transaction holds the horizon: it may stay open for long.
                delay = max(delay, min(0.1, BUSY_POLL + (now - held_since) / 10))
            if self._asleep and not result.held_back:
                # Changes come slowly: the tick's gathering is folded into the wait for the next NOTIFY (one
                # wake-up a cycle instead of two; most commits come after the tick anyway).
                not_before = now + delay
            else:
                not_before = 0.0
                if delay:
                    await asyncio.sleep(delay)
            if result.held_back or (result.changes and not self._asleep):
                continue  # busy: read again at once (asleep, a commit since the read has set the wake-up)
            due = min(d for d in (core.next_due(), self.extras.next_due) if d is not None)
            if now - last_change < LINGER and gap < STEADY_GAP:
                # Awake: poll again soon. Writers are not asked to NOTIFY meanwhile (it serialises commits).
                wait = BUSY_POLL if due is None else min(BUSY_POLL, max(0.0, due - time.monotonic()))
                await asyncio.sleep(wait)
                continue
            await self._sleep(conn, reader, due)
            if not_before > time.monotonic():
                await asyncio.sleep(not_before - time.monotonic())

    def _observe_published(self, changes: list[Change | SubmissionChange | MembershipChange]) -> None:
        """The cycle's changes are on the bus: commit (the writer's statement time, on PostgreSQL's clock) to
        publish, for each, and the newest one's as the partition's lag."""
        now = time.time()
        latency = self.figures.commit_to_publish
        newest = None
        for change in changes:
            if isinstance(change, Change) and change.job.updated_at is not None:
                at = change.job.updated_at.timestamp()
                latency.observe(max(0.0, now - at))
                newest = at if newest is None or at > newest else newest
        if newest is not None:
            self.figures.lag = max(0.0, now - newest)

    async def _publish(
        self,
        lock_conn: asyncpg.Connection,
        conn: asyncpg.Connection,
        core: RelayCore,
        publisher: Publisher,
        now: float,
        cursor: str | None,
    ) -> None:
        """Publish the cycle; while Redis is away keep it and retry, so nothing is dropped."""
        finishes = core.take_finishes(now)
        markers = {(f.trajectory_id, f.wave): publisher.marker(f.trajectory_id, f.wave) for f in finishes}
        if finishes:
            # A predecessor may have published a finish before it could record it: never twice.
            done = await _retry_redis(lambda: publisher.published_markers(list(markers.values())))
            finishes = [f for f in finishes if markers[(f.trajectory_id, f.wave)] not in done]
        extras: list[tuple[int, Presence | ClusterStats]] = []
        if now >= self.extras.next_due:
            try:
                extras = await self.extras.collect(conn, now)
            except (RedisError, OSError):
                pass  # presence and metrics are best effort: the next tick tries again
        missing = core.channels_without_seq() + core.channels_for_finishes(finishes)
        missing += [c for c in {channels.team(t) for t, _ in extras} if c not in missing and not core.knows_seq(c)]
        if missing:
            core.set_seqs(await _retry_redis(lambda: publisher.last_seqs(missing)))
        publications: list[Publication] = (
            core.take_job_publications()
            + core.take_team_publications(now)
            + core.finish_publications(finishes, markers)
        )
        publications += [core.team_extra_publication(team_id, update) for team_id, update in extras]
        if not publications and cursor is None:
            if markers:
                await self._record_waves_closed(conn, list(markers))
            return
        await self._check_lock(lock_conn)
        delay = 0.05
        while True:
            try:
                await publisher.publish(publications, cursor)
                self.published += len(publications)
                self.figures.published += len(publications)
                if markers:  # published first, recorded second: a crash between is caught by the markers
                    await self._record_waves_closed(conn, list(markers))
                return
            except (RedisError, OSError) as exc:
                log.warning("publish failed (%s); retrying", type(exc).__name__)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
            await self._check_lock(lock_conn)
            try:
                if not await publisher.fence_exists():
                    # Redis came back empty: fence again and send every team's whole state again.
                    await publisher.take_over()
                    core.mark_all_dirty()
                    publications += core.take_team_publications(time.monotonic())
            except (RedisError, OSError):
                pass

    async def _restore_waves(self, conn: asyncpg.Connection, reader: OutboxReader, core: RelayCore) -> None:
        """Carry the previous relay's waves over: finish the open ones it could not, never repeat a closed one."""
        now = time.monotonic()
        for row in reader.waves:
            trajectory_id, number = row["trajectory_id"], row["wave"]
            if not row["open"]:
                core.finishes.restore(trajectory_id, number, None)
                continue
            facts = await conn.fetchrow(
                "select coalesce(bool_or(kind = 'analysis'), false) as analysis,"
                " coalesce(bool_or(kind = 'rasterize'), false) as rasterize,"
                " coalesce(bool_or(status = 'failed'), false) as failed"
                " from jobs where trajectory_id = $1 and updated_at >= $2",
                trajectory_id,
                row["started_at"],
            )
            traj = core.aggregates.trajectory(trajectory_id)
            idle = traj is None or traj.active() == 0
            wave = Wave(number, facts["analysis"], facts["rasterize"], facts["failed"], now if idle else None)
            core.finishes.restore(trajectory_id, number - 1, wave)

    async def _record_waves_started(self, conn: asyncpg.Connection, core: RelayCore) -> None:
        started = core.finishes.take_started()
        if started:
            await conn.execute(
                "insert into trajectory_waves (trajectory_id, wave, open, started_at)"
                " select t, w, true, coalesce(s, now()) from unnest($1::bigint[], $2::int[], $3::timestamptz[]) as u(t, w, s)"
                " where exists (select 1 from trajectories where id = t)"
                " on conflict (trajectory_id) do update set wave = excluded.wave, open = true, started_at = excluded.started_at",
                [t for t, _, _ in started],
                [w for _, w, _ in started],
                [s for _, _, s in started],
            )

    async def _record_waves_closed(self, conn: asyncpg.Connection, waves: list[tuple[int, int]]) -> None:
        await conn.execute(
            "update trajectory_waves w set open = false from unnest($1::bigint[], $2::int[]) as u(t, n)"
            " where w.trajectory_id = u.t and w.wave = u.n",
            [t for t, _ in waves],
            [n for _, n in waves],
        )

    async def _write_stats(self, publisher: Publisher, core: RelayCore, held_since: float | None, now: float) -> None:
        """What /readyz on every node reads of the relay: a heartbeat, lag, what holds it back. (Its /metrics
        figures are its own: gateway.relay.metrics.)"""
        stats: Mapping[str | bytes | bytearray | memoryview | int | float, Any] = {
            "epoch": core.epoch,
            "heartbeat": time.time(),
            "lag_seconds": round(self.figures.lag, 4),
            "changes": core.changes_applied,
            "deltas": core.deltas_taken,
            "published": self.published,
            "held_back_seconds": round(now - held_since, 3) if held_since is not None else 0,
            "blocker_pid": self._blocker.pid if self._blocker else 0,
            "blocker_xid": self._blocker.xid if self._blocker else 0,
        }
        name = keys.relay_stats(self.tag)
        try:
            async with self.bus.redis.pipeline(transaction=False) as pipe:
                pipe.hset(name, mapping=stats)
                pipe.expire(name, 30)
                await pipe.execute()
        except (RedisError, OSError):
            pass

    async def _check_lock(self, lock_conn: asyncpg.Connection) -> None:
        """Our session holds the lock as long as it is alive: prove it is (at most LOCK_PROOF_AGE ago) before
        publishing."""
        if time.monotonic() - self._lock_proven < LOCK_PROOF_AGE:
            return
        try:
            await lock_conn.fetchval("select 1", timeout=LOCK_CHECK_TIMEOUT)
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise LostLock(f"lock connection failed: {type(exc).__name__}") from exc
        self._lock_proven = time.monotonic()

    async def _sleep(self, conn: asyncpg.Connection, reader: OutboxReader, due: float | None) -> None:
        """Wait for a writer's NOTIFY (or what is due). The relay stays marked asleep after it wakes, as long as
        changes come slowly: two UPDATEs a cycle saved, and the next wait needs no second look."""
        timeout = IDLE_POLL if due is None else max(0.0, due - time.monotonic())
        if not self._asleep:
            # Ask writers to wake us, then look once more: a commit may have slipped in before the flag.
            self._wake.clear()
            await self._sleeping(conn, True)
            if await reader.peek():
                return
            # A writer whose statement still saw the flag unset sends no NOTIFY, and may commit just after
            # that look: look again shortly, once, instead of at the next due time.
            timeout = min(timeout, SECOND_LOOK)
        try:
            async with asyncio.timeout(timeout):
                await self._wake.wait()
        except TimeoutError:
            pass

    async def _sleeping(self, conn: asyncpg.Connection, sleeping: bool) -> None:
        await conn.execute("update relay_wakeup set sleeping = $2 where partition = $1", self.partition, sleeping)
        self._asleep = sleeping

    async def _sweep(self, conn: asyncpg.Connection) -> None:
        """Jobs past retention leave the lists through the captured path (counts stay exact); their rows stay
        as tombstones, so a late report cannot bring them back, until long after."""
        while True:
            status = await conn.execute(
                "update jobs set removed_at = now() where id in (select id from jobs where removed_at is null"
                " and updated_at < now() - make_interval(secs => $1) limit 5000)",
                self.process.job_retention,
            )
            if status != "UPDATE 5000":
                break
        await conn.execute(
            "delete from jobs where id in (select id from jobs where removed_at < now() - make_interval(secs => $1) limit 5000)",
            self.process.job_retention * 7,
        )

    async def _prune(self, conn: asyncpg.Connection, published_at: deque[tuple[float, str]], now: float) -> None:
        """Delete outbox rows published more than `retention` seconds ago, in small batches."""
        cutoff: str | None = None
        while published_at and now - published_at[0][0] > self.process.retention:
            cutoff = published_at.popleft()[1]
        if cutoff is None:
            return
        xid, _, seq = cutoff.partition(":")
        while True:
            status = await conn.execute(
                "delete from job_changes where seq in (select seq from job_changes"
                " where (xid, seq) <= ($1::bigint, $2::bigint) and ($3::int = 1 or team_id % $3 = $4) limit 10000)",
                int(xid),
                int(seq),
                self.bus.partitions.count,
                self.partition,
            )
            if status == "DELETE 0" or not status.startswith("DELETE 10000"):
                return


async def _retry_redis(call):
    """Redis may be restarting: wait for it rather than give up the lock."""
    delay = 0.05
    while True:
        try:
            return await call()
        except (RedisError, OSError) as exc:
            log.warning("redis unavailable (%s); retrying", type(exc).__name__)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)


async def _lock_connection(database_url: str) -> asyncpg.Connection:
    conn = await asyncpg.connect(database_url, server_settings={"application_name": "gateway-relay-lock", **_KEEPALIVE})
    _client_keepalive(conn)
    return conn


def _client_keepalive(conn: asyncpg.Connection) -> None:
    """Notice a dead peer on the lock connection from our side too."""
    sock = conn._transport.get_extra_info("socket") if conn._transport is not None else None
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", 5), ("TCP_KEEPINTVL", 2), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
