"""The relay's publish cycle: read the outbox past the cursor, fold it into the batcher, publish what is due.

What a cycle publishes, and how it recovers, is decided by a sans-I/O machine (gateway.core.publish_cycle); this
module carries its actions out against PostgreSQL and the bus and feeds back what they gave. A cycle's messages
go out in one publish (gateway.bus.publisher) with the outbox cursor they reach; while the bus is away the cycle
is kept and retried, so nothing is dropped. A wave's finish is published first and recorded in PostgreSQL
second: a crash between is caught by the finish's marker on the bus. A bus that lost what the relay published
(restarted empty, or failed over to a replica behind the old primary) is given every team's whole state again,
so that snapshots never serve the state it kept.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol

from .. import tracing
from ..bus.errors import BusBehind, BusRefused, BusUnavailable, Fenced
from ..bus.publisher import PartitionPublisher
from ..core.aggregate import AnyChange, Change, MembershipsChanged, OwnershipsChanged
from ..core.batching import Batcher
from ..core.cycle_actions import (
    ANNOUNCED,
    BEHIND,
    DONE,
    FOUND_BEHIND,
    LOCK_PROVED,
    NOT_BEHIND,
    PUBLISHED,
    RECORDED,
    SAVED,
    WAITED,
    Action,
    Announce,
    CheckBus,
    CollectExtras,
    Event,
    ExtrasCollected,
    Failed,
    FenceRaised,
    MarkersRead,
    ProveLock,
    Publish,
    RaiseFence,
    ReadMarkers,
    ReadSeqs,
    RecordClosed,
    SaveRows,
    SeqsRead,
    Wait,
)
from ..core.publish_cycle import PublishCycle
from ..core.team import ClusterStats, Presence
from ..store import outbox, submission_rows, waves
from ..store.joint_reads import JointReads
from ..store.outbox import OutboxReader, ReadResult
from ..store.types import Connection
from .metrics import PartitionFigures
from .retry import FOREVER, Patience, retry_redis

log = logging.getLogger(__name__)


class Extras(Protocol):
    """Presence and cluster metrics for the team channels (gateway.relay.extras), collected at most when due."""

    next_due: float

    async def collect(self, db: Connection, now: float) -> list[tuple[int, Presence | ClusterStats]]: ...


class RelayCycle:
    """One partition's cycles in one relay epoch: the publish machine's actions carried out."""

    def __init__(
        self,
        db: Connection,
        reader: OutboxReader,
        core: Batcher,
        publisher: PartitionPublisher,
        extras: Extras,
        prove_lock: Callable[[], Awaitable[None]],
        announce: Callable[[MembershipsChanged | OwnershipsChanged], Awaitable[object]],
        figures: PartitionFigures,
        published: int = 0,
        joint: JointReads | None = None,
        patience: Patience = FOREVER,
    ) -> None:
        self.db = db  # the outbox connection: it also records waves
        self.reader = reader
        self.core = core
        self.machine = PublishCycle(core, publisher.marker)
        self.publisher = publisher
        self.extras = extras
        self.prove_lock = prove_lock  # raises LostLock: called before anything goes out
        self.announce = announce  # membership changes, to every node
        self.figures = figures
        self.published = published  # messages published by this partition's relay (its stats in Redis)
        self.joint = joint  # the process's joint reads, when it serves several partitions
        self.patience = patience  # how long Redis may not answer before the relay steps down
        self._deadline: float | None = None  # the cycle's publish gives up past it (None: never)
        # The oldest commit time (Unix seconds) of the changes read and not yet out, in each envelope: nodes
        # measure commit to write from it (gateway_delivery_lag_seconds). 0.0: none.
        self._committed = 0.0
        # The trace contexts of the changes read and not yet out (gateway.tracing; always empty while it is off).
        self._traces: list[str] = []

    async def read(self, together: bool = False) -> ReadResult:
        """The next captured changes, applied to the batcher (waves they open recorded); `together`: in one
        statement with the process's other partitions reading now (gateway.store.joint_reads)."""
        joint = self.joint
        result = await (joint.read(self.reader) if together and joint is not None else self.reader.read())
        if result.changes:
            core = self.core
            unknown = core.unknown_trajectories(result.changes)
            if unknown:
                for trajectory_id, team_id, name in await outbox.trajectories(self.db, list(unknown)):
                    core.add_trajectory(trajectory_id, team_id, name)
            set_aside = core.submissions.missing(result.changes)
            if set_aside:  # submissions not in memory: folded on from their saved rows (new ones have none)
                core.submissions.restore(await submission_rows.restore(self.db, set_aside))
            core.apply(result.changes, time.monotonic())
            started = core.finishes.take_started()
            if started:
                await waves.record_started(self.db, started)
        return result

    async def publish(self, result: ReadResult, now: float) -> None:
        """Publish what the read made due (and whatever else is due now), then announce membership changes."""
        if result.changes:
            self._committed = oldest_commit(result.changes, self._committed)
        if result.traces:
            self._traces += (t for t in result.traces if t not in self._traces[-8:])
            del self._traces[: -tracing.MAX_LINKS]  # the newest: a change held back keeps its trace a while
        await self._cycle(now, self.reader.position if result.changes else None)
        if result.changes:
            self._observe_published(result.changes)

    def next_due(self) -> float:
        """When a cycle is due even with no new change: a team to publish, a wave to finish, extras to collect."""
        return min(d for d in (self.core.next_due(), self.extras.next_due) if d is not None)

    async def check_bus(self, now: float) -> None:
        """At each turn of the relay's loop, at most every second (gateway.core.publish_cycle.BUS_CHECK_EVERY):
        whether the bus still holds what this relay published. A publish finds out by itself (BusBehind); this
        finds out for a partition with nothing to publish, whose teams' stored state would otherwise stay what
        the bus kept until their next change."""
        machine = self.machine
        if not machine.bus_check_due(now):
            return
        try:
            behind = await self.patience.attempt(self.publisher.behind, self.patience.deadline())
        except (BusUnavailable, BusRefused):
            return  # the next publish, or the next check, finds out
        if machine.bus_checked(behind):
            await self._cycle(now, None)

    async def _cycle(self, now: float, cursor: str | None) -> None:
        """Carry out one cycle's actions until the machine is done; any error that escapes ends its epoch."""
        machine = self.machine
        action = machine.start(now, time.time(), cursor, now >= self.extras.next_due)
        try:
            while action is not DONE:
                action = machine.feed(await self._perform(action, now))
        except Fenced:
            machine.fenced()
            raise
        except BaseException:
            machine.abandon()
            raise

    def _held_back(self) -> bool:
        """Whether changes already read wait for a later publish: a team's summary inside its interval, a job
        channel's window (a team's members follow its summary, not the job's channel: the trace must reach them)."""
        return self.core.next_team_due() is not None or self.core.windows.next_due() is not None

    async def _perform(self, action: Action, now: float) -> Event:
        """One action against PostgreSQL or the bus; what it gave, as the machine's event."""
        publisher, patience = self.publisher, self.patience
        match action:
            case Publish(publications, cursor):
                span = tracing.relay_publish(
                    self._traces if publications else [], self.reader.partition, len(publications)
                )
                try:
                    with span as trace:
                        publish = partial(publisher.publish, publications, cursor, self._committed, trace=trace)
                        await patience.attempt(publish, self._deadline)
                except BusBehind:
                    return BEHIND
                except (BusUnavailable, BusRefused) as exc:
                    return self._failed(exc)
                self.published += len(publications)
                self.figures.published += len(publications)
                if publications:
                    self._committed = 0.0  # what was read is out; a team held back comes in a later read's cycle
                    if not self._held_back():  # else their changes' traces go with the later publish too
                        self._traces = []
                return PUBLISHED
            case ReadSeqs(names):
                return SeqsRead(await retry_redis(lambda: publisher.last_seqs(names), patience))
            case SaveRows(rows):
                await submission_rows.save(self.db, rows)
                self.core.submissions.trim()  # those saved as they are may now be set aside
                return SAVED
            case ProveLock(retry):
                await self.prove_lock()
                if not retry:  # the cycle's first try: the patience runs from here
                    self._deadline = patience.deadline()
                return LOCK_PROVED
            case Wait(seconds):
                await asyncio.sleep(seconds)
                return WAITED
            case CheckBus():
                try:
                    return FOUND_BEHIND if await patience.attempt(publisher.behind, self._deadline) else NOT_BEHIND
                except (BusUnavailable, BusRefused) as exc:
                    return Failed(exc)
            case RaiseFence():
                try:
                    await patience.attempt(self._raise_fence, self._deadline)
                except (BusUnavailable, BusRefused) as exc:
                    return self._failed(exc)
                return FenceRaised(time.monotonic())
            case ReadMarkers(markers):
                return MarkersRead(await retry_redis(lambda: publisher.published_markers(markers), patience))
            case CollectExtras():
                try:
                    return ExtrasCollected(await self.extras.collect(self.db, now))
                except (BusUnavailable, BusRefused):
                    return ExtrasCollected([])  # presence and metrics are best effort: the next tick tries again
            case RecordClosed(closed):
                await waves.record_closed(self.db, closed)
                return RECORDED
            case Announce(announcement):
                await retry_redis(lambda: self.announce(announcement), patience)
                return ANNOUNCED
        raise AssertionError(f"an action the relay does not know: {action!r}")

    async def _raise_fence(self) -> None:
        """The bus lost what this relay published (it restarted empty, or failed over to a replica behind the old
        primary): fence again, and take the bus's relay cursor as it is; every team's whole state goes out next."""
        log.warning("the bus lost what this relay published (a restart or a failover); sending every team's state")
        await self.publisher.take_over()
        await self.publisher.relay_cursor()

    def _failed(self, exc: BusUnavailable | BusRefused) -> Failed:
        """A try the bus did not take: kept, not dropped (the cursor goes out with the cycle, so the relay holds
        its place in the outbox). Past the patience the relay steps down; the successor reads on from the bus's
        cursor."""
        if isinstance(exc, BusRefused):
            self._deadline = self.patience.deadline()  # Redis answered (a full one refuses): its link is not at fault
        else:
            self.patience.check(self._deadline, exc)
        # A refusal (Redis out of memory: "OOM command not allowed ...") says why; a lost connection does not need to.
        detail = f": {exc}" if isinstance(exc, BusRefused) else ""
        log.warning("publish failed (%s%s); retrying", type(exc).__name__, detail)
        return Failed(exc)

    def _observe_published(self, changes: list[AnyChange]) -> None:
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


def oldest_commit(changes: list[AnyChange], oldest: float) -> float:
    """The earliest statement time among the jobs' changes (PostgreSQL's clock), or `oldest` if earlier. A deleted
    job's image keeps the row's last `updated_at`, which may be days old (retention, a team deleted); its capture
    stamps `removed_at` with the delete's statement time, so the later of the two is the change's own time."""
    for change in changes:
        if not isinstance(change, Change):
            continue
        updated, removed = change.job.updated_at, change.job.removed_at
        if updated is not None:
            at = max(updated, removed).timestamp() if removed is not None else updated.timestamp()
            if not oldest or at < oldest:
                oldest = at
    return oldest
