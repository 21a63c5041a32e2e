"""The relay's publish cycle: read the outbox past the cursor, fold it into the batcher, publish what is due.

A cycle's messages go out in one publish (gateway.bus.publisher) with the outbox cursor they reach; while the
bus is away the cycle is kept and retried, so nothing is dropped. A wave's finish is published first and
recorded in PostgreSQL second: a crash between is caught by the finish's marker on the bus. A bus that lost what
the relay published (restarted empty, or failed over to a replica behind the old primary) is given every team's
whole state again, so that snapshots never serve the state it kept.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Protocol

import asyncpg
import msgspec

from ..bus.errors import BusBehind, BusRefused, BusUnavailable
from ..bus.publisher import PartitionPublisher
from ..core import channels
from ..core.aggregate import AnyChange, Change
from ..core.batching import Batcher, Publication
from ..core.team import ClusterStats, Presence
from ..store import outbox, submission_rows, waves
from ..store.joint_reads import JointReads
from ..store.outbox import OutboxReader, ReadResult
from .metrics import PartitionFigures
from .retry import FOREVER, Patience, retry_redis

log = logging.getLogger(__name__)

_membership_encoder = msgspec.json.Encoder()
BUS_CHECK_EVERY = 1.0  # seconds between checks that the bus still holds what this relay published (check_bus)


class Extras(Protocol):
    """Presence and cluster metrics for the team channels (gateway.relay.extras), collected at most when due."""

    next_due: float

    async def collect(self, db: asyncpg.Connection, now: float) -> list[tuple[int, Presence | ClusterStats]]: ...


class PublishCycle:
    """One partition's cycles in one relay epoch."""

    def __init__(
        self,
        db: asyncpg.Connection,
        reader: OutboxReader,
        core: Batcher,
        publisher: PartitionPublisher,
        extras: Extras,
        prove_lock: Callable[[], Awaitable[None]],
        announce: Callable[[bytes], Awaitable[object]],
        figures: PartitionFigures,
        published: int = 0,
        joint: JointReads | None = None,
        patience: Patience = FOREVER,
    ) -> None:
        self.db = db  # the outbox connection: it also records waves
        self.reader = reader
        self.core = core
        self.publisher = publisher
        self.extras = extras
        self.prove_lock = prove_lock  # raises LostLock: called before anything goes out
        self.announce = announce  # membership changes, to every node
        self.figures = figures
        self.published = published  # messages published by this partition's relay (its stats in Redis)
        self.joint = joint  # the process's joint reads, when it serves several partitions
        self.patience = patience  # how long Redis may not answer before the relay steps down
        self._behind = False  # the bus lost what this relay published: send every team's whole state again
        self._bus_checked_at = 0.0

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
            core.apply(result.changes, time.monotonic())
            started = core.finishes.take_started()
            if started:
                await waves.record_started(self.db, started)
        return result

    async def publish(self, result: ReadResult, now: float) -> None:
        """Publish what the read made due (and whatever else is due now), then announce membership changes."""
        await self._publish(now, self.reader.position if result.changes else None)
        memberships = self.core.take_memberships()
        if memberships:
            payload = _membership_encoder.encode(memberships)
            await retry_redis(lambda: self.announce(payload), self.patience)
        moved = self.core.take_ownerships()
        if moved:  # a message of its own: nodes that predate it ignore it, and no membership change with it
            moved_payload = _membership_encoder.encode({"moved": moved})
            await retry_redis(lambda: self.announce(moved_payload), self.patience)
        if result.changes:
            self._observe_published(result.changes)

    def next_due(self) -> float:
        """When a cycle is due even with no new change: a team to publish, a wave to finish, extras to collect."""
        return min(d for d in (self.core.next_due(), self.extras.next_due) if d is not None)

    async def _publish(self, now: float, cursor: str | None) -> None:
        """Publish the cycle; while the bus is away keep it and retry, so nothing is dropped."""
        core, publisher = self.core, self.publisher
        finishes = core.take_finishes(now)
        markers = {(f.trajectory_id, f.wave): publisher.marker(f.trajectory_id, f.wave) for f in finishes}
        if finishes:
            # A predecessor may have published a finish before it could record it: never twice.
            done = await retry_redis(lambda: publisher.published_markers(list(markers.values())), self.patience)
            finishes = [f for f in finishes if markers[(f.trajectory_id, f.wave)] not in done]
        extras: list[tuple[int, Presence | ClusterStats]] = []
        if now >= self.extras.next_due:
            try:
                extras = await self.extras.collect(self.db, now)
            except (BusUnavailable, BusRefused):
                pass  # presence and metrics are best effort: the next tick tries again
        missing = core.channels_without_seq() + core.channels_for_finishes(finishes)
        missing += [c for c in {channels.team(t) for t, _ in extras} if c not in missing and not core.knows_seq(c)]
        if missing:
            core.set_seqs(await retry_redis(lambda: publisher.last_seqs(missing), self.patience))
        core.refresh_eta(now, time.time())
        publications: list[Publication] = (
            core.take_job_publications(now)
            + core.take_team_publications(now)
            + core.finish_publications(finishes, markers)
        )
        publications += [core.team_extra_publication(team_id, update) for team_id, update in extras]
        # Saved before they go out: a window read after a row's delta arrived is never older than the delta.
        await submission_rows.save(self.db, core.submissions.take_to_save())
        if not publications and cursor is None and not self._behind:
            if markers:
                await waves.record_closed(self.db, list(markers))
            return
        await self.prove_lock()
        delay = 0.05
        patience = self.patience
        deadline = patience.deadline()
        while True:
            try:
                if self._behind:
                    publications += await patience.attempt(self._refill, deadline)
                    self._behind = False
                await patience.attempt(partial(publisher.publish, publications, cursor), deadline)
                self.published += len(publications)
                self.figures.published += len(publications)
                if markers:  # published first, recorded second: a crash between is caught by the markers
                    await waves.record_closed(self.db, list(markers))
                return
            except BusBehind:
                self._behind = True
            except (BusUnavailable, BusRefused) as exc:
                # Kept, not dropped: the cursor goes out with the cycle, so the relay holds its place in the outbox.
                # A refusal (Redis out of memory: "OOM command not allowed ...") says why; a lost connection does
                # not need to.
                if isinstance(exc, BusRefused):
                    deadline = patience.deadline()  # Redis answered (a full one refuses): its link is not at fault
                else:
                    patience.check(deadline, exc)  # past it: step down, the successor reads on from the bus's cursor
                detail = f": {exc}" if isinstance(exc, BusRefused) else ""
                log.warning("publish failed (%s%s); retrying", type(exc).__name__, detail)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
            await self.prove_lock()
            try:
                self._behind = self._behind or await patience.attempt(publisher.behind, deadline)
            except (BusUnavailable, BusRefused):
                pass

    async def check_bus(self, now: float) -> None:
        """At each turn of the relay's loop, at most every BUS_CHECK_EVERY seconds: whether the bus still holds
        what this relay published. A publish finds out by itself (BusBehind); this finds out for a partition with
        nothing to publish, whose teams' stored state would otherwise stay what the bus kept until their next
        change."""
        if now - self._bus_checked_at < BUS_CHECK_EVERY:
            return
        self._bus_checked_at = now
        try:
            behind = await self.patience.attempt(self.publisher.behind, self.patience.deadline())
        except (BusUnavailable, BusRefused):
            return  # the next publish, or the next check, finds out
        self._behind = self._behind or behind
        if self._behind:
            await self._publish(now, None)

    async def _refill(self) -> list[Publication]:
        """The bus lost what this relay published (it restarted empty, or failed over to a replica behind the old
        primary): fence again, take the bus's relay cursor as it is, and send every team's whole state again."""
        log.warning("the bus lost what this relay published (a restart or a failover); sending every team's state")
        await self.publisher.take_over()
        await self.publisher.relay_cursor()
        self.core.mark_all_dirty()
        publications = self.core.take_team_publications(time.monotonic())
        await submission_rows.save(self.db, self.core.submissions.take_to_save())
        return publications

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
