"""One partition's relay: take over with a new epoch, load the state, then loop over read, publish, maintain.

A takeover takes a new epoch and raises the partition's fence on the bus to it, so a relay that lost its lock
cannot publish after its successor has started. The state comes from one consistent snapshot of the database
(gateway.store.outbox), and the waves the predecessor left open are carried over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from ..bus import relay_stats
from ..bus.broker import Broker
from ..bus.publisher import PartitionPublisher
from ..core.batching import Batcher
from ..core.finish import Wave
from ..core.work_snapshot import WorkSnapshot
from ..store import outbox, partitions, waves
from ..store.joint_reads import JointReads
from ..store.outbox import OutboxReader, ReadResult
from ..store.types import Connection
from ..web.node.logs import bind
from .cycle import RelayCycle
from .extras import TeamExtras
from .maintenance import Heartbeat, HoldBackWatch, Housekeeping
from .metrics import PartitionFigures
from .ownership import SERVICE_ERRORS, HeldLock, take_or_wait
from .pacing import Pace, Pacer
from .retry import FOREVER, Patience, retry_redis

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PartitionSettings:
    """What a partition's relay needs of its process (gateway.relay.runner): its settings, and the parts the
    process's partitions share."""

    database_url: str
    history_length: int  # a channel's history: at most this many messages,
    history_ttl: int  # kept this many seconds after its last one,
    history_bytes: int  # and at most this many bytes
    retention: float  # outbox rows are kept this long after they were published
    job_retention: float  # a job is listed this long after its last change
    cluster_silent_after: float  # seconds without a request before a cluster is silent
    activity_days: float  # who did what is kept this many days (GATEWAY_ACTIVITY_DAYS)
    finish_settle: float  # seconds with no active job before a trajectory's work counts as finished
    submissions_cached: int  # submissions kept in memory besides those in use (GATEWAY_RELAY_SUBMISSIONS_CACHED)
    presence: bool  # presence on the team channels (off on single-user deployments)
    metrics: bool  # cluster figures on the team channels (off in local mode)
    patience: Patience = FOREVER  # Redis not answering this long, the relay stands by for one that may reach it
    joint: JointReads | None = None  # several partitions: their busy relays read the outbox in one statement
    pace: Pace | None = None  # and they poll while the process is busy


class PartitionRelay:
    """The active relay of one partition while its process holds the partition's lock."""

    def __init__(self, settings: PartitionSettings, broker: Broker, partition: int, figures: PartitionFigures) -> None:
        self.settings = settings
        self.broker = broker
        self.partition = partition
        self.tag = broker.partitions.tags[partition]
        self.published = 0  # messages published, over every time this object served (its stats in Redis)
        self.figures = figures  # this partition's, in the process's /metrics

    async def run(self) -> None:
        """Stand by, take over, serve; after losing the lock or the database, stand by again."""
        bind(partition=self.partition)  # in every line this partition's task logs (gateway.web.node.logs)
        delay = 0.2
        while True:
            try:
                lock = await take_or_wait(self.settings.database_url, self.partition)
                await self._session(lock)
                return
            except SERVICE_ERRORS as exc:
                log.warning("relay stopped serving (%s: %s); standing by again", type(exc).__name__, exc)
            except Exception:  # a relay must outlive whatever a broken connection throws: stand by, try again
                log.exception("relay stopped serving on an unexpected error; standing by again")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def serve_once(self, lock: HeldLock) -> None:
        """Serve while the lock holds; on losing it, end (the process may take the partition again)."""
        try:
            await self._session(lock)
        except SERVICE_ERRORS as exc:
            log.warning("partition %d: relay stopped serving (%s: %s)", self.partition, type(exc).__name__, exc)
        except Exception:
            log.exception("partition %d: relay stopped serving on an unexpected error", self.partition)

    async def _session(self, lock: HeldLock) -> None:
        try:
            epoch = await partitions.next_epoch(lock.db)
            log.info("relay active for partition %d, epoch %d", self.partition, epoch)
            await lock.hold_while(self._serve(lock, epoch))
        finally:
            lock.release()

    async def _serve(self, lock: HeldLock, epoch: int) -> None:
        settings, count = self.settings, self.broker.partitions.count
        db = await outbox.connect(settings.database_url)
        try:
            reader = OutboxReader(db, self.partition, count)
            pacer = Pacer(db, reader, self.partition, settings.pace)
            await outbox.listen(db, self.partition, pacer.wake.set)
            await outbox.register_wakeup(db, self.partition, count)
            await outbox.partition_index(db, count)  # at once unless the partitions were just changed
            publisher = self.broker.publisher(
                self.tag, epoch, settings.history_length, settings.history_ttl, settings.history_bytes
            )
            await retry_redis(publisher.take_over, settings.patience)
            extras = TeamExtras(self.broker, settings.presence, settings.metrics, reader.mine)
            core = Batcher(epoch, settings.finish_settle, settings.submissions_cached)
            self.figures.serving(core)
            await load_state(db, reader, publisher, core, settings.patience)
            log.info(
                "partition %d: state loaded (%d trajectories), reading from %s",
                self.partition,
                sum(len(t.trajectories) for t in core.aggregates.teams.values()),
                reader.position,
            )
            cycle = RelayCycle(
                db,
                reader,
                core,
                publisher,
                extras,
                lock.prove,
                self.broker.announcements.announce,
                self.figures,
                self.published,
                settings.joint,
                settings.patience,
            )
            try:
                await self._loop(cycle, pacer)
            finally:
                self.published = cycle.published
        finally:
            self.figures.stopped()
            db.terminate()

    async def _loop(self, cycle: RelayCycle, pacer: Pacer) -> None:
        settings, reader = self.settings, cycle.reader
        watch = HoldBackWatch(reader, self.figures)
        heartbeat = Heartbeat(self._write_stats, self.figures)
        housekeeping = Housekeeping(
            reader, settings.retention, settings.job_retention, settings.cluster_silent_after, settings.activity_days
        )
        await pacer.start()
        reads = True
        while True:
            started = time.monotonic()
            if reads:
                pacer.before_read()
                result = await cycle.read(together=not pacer.asleep)
                self.figures.reads += 1
            else:  # asleep and no NOTIFY came: nothing was committed, publish what is due
                result = ReadResult([], result.horizon, False, False)
            self.figures.cycles += 1
            now = time.monotonic()
            await cycle.publish(result, now)
            await cycle.check_bus(now)
            await heartbeat.beat(now, cycle.core, cycle.published, watch)
            await housekeeping.after_cycle(result, now)
            await watch.observe(result, now)
            reads = result.full or await pacer.wait(result, started, now, watch.held_since, cycle.next_due)

    async def _write_stats(self, stats: relay_stats.RelayStats) -> None:
        await self.broker.relay_stats.write(self.tag, stats)


async def load_state(
    db: Connection,
    reader: OutboxReader,
    publisher: PartitionPublisher,
    core: Batcher,
    patience: Patience = FOREVER,
) -> None:
    """A new epoch's starting point: counts from one snapshot, reading from where the previous relay published
    up to (rows the snapshot saw go out as deltas only), and the waves it left.

    A bus with no cursor (new, or restarted empty) is given this relay's starting point at once: were it to die
    before its first publish, its successor reads on from there, and the changes between the two snapshots still
    go out (their subscribers read the jobs before them), rather than from its own later snapshot on."""
    published = await retry_redis(publisher.relay_cursor, patience)
    core.load(await reader.load(published, core.load_submissions))
    if published is None:
        start = reader.position
        await retry_redis(lambda: publisher.publish([], start), patience)
    core.load_work(reader.work)
    reader.work = WorkSnapshot()
    await restore_waves(db, reader, core)


async def restore_waves(db: Connection, reader: OutboxReader, core: Batcher) -> None:
    """Carry the previous relay's waves over: finish the open ones it could not, never repeat a closed one; and
    open a wave for work no relay saw start."""
    now = time.monotonic()
    closed_at = {}  # when each trajectory's last wave closed: a wave opened now holds what its jobs did since
    for row in reader.waves:
        trajectory_id, number = row["trajectory_id"], row["wave"]
        if not row["open"]:
            core.finishes.restore(trajectory_id, number, None)
            closed_at[trajectory_id] = row["closed_at"] or row["started_at"]  # closed before closed_at was kept
            continue
        facts = await waves.facts(db, trajectory_id, row["started_at"])
        traj = core.aggregates.trajectory(trajectory_id)
        idle = traj is None or traj.active() == 0
        wave = Wave(number, facts.analysis, facts.rasterize, facts.failed, facts.stopped, facts.submissions)
        core.finishes.restore(trajectory_id, number - 1, wave, now if idle else None)
    core.open_unrecorded_waves()
    started = core.finishes.take_started()
    for trajectory_id, _, _ in started:  # work no relay saw start: what it did before now is in its jobs
        facts = await waves.facts(db, trajectory_id, closed_at.get(trajectory_id))
        core.finishes.waves[trajectory_id].learn(facts.analysis, facts.rasterize, facts.failed, facts.submissions)
    if started:
        await waves.record_started(db, started)
