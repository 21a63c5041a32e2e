"""What the relay does between cycles besides publishing: report, watch what holds it back, keep tables small.

- `Heartbeat`: about once a second, the partition's figures in Redis (gateway.bus.relay_stats), which /readyz
  on every node judges.
- `HoldBackWatch`: since when an open transaction holds the outbox's horizon back, and which one (logged).
- `Housekeeping`: outbox rows published `retention` seconds ago are deleted; partition 0 also sweeps jobs
  past their retention, and lists the unfinished jobs of clusters silent for `silent_after` seconds as silent
  (for all partitions: the sweeps' changes reach each partition through the outbox).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

from ..bus.errors import BusError
from ..bus.relay_stats import RelayStats
from ..core.batching import Batcher
from ..store import activity, clusters, maintenance
from ..store.outbox import Blocker, OutboxReader, ReadResult
from .metrics import PartitionFigures

log = logging.getLogger(__name__)

STATS_EVERY = 1.0
HELD_BACK_LOG_AFTER = 2.0
HELD_BACK_LOG_EVERY = 10.0
# PostgreSQL's horizon counts every database of the server: another application's open transaction holds us too.
ELSEWHERE = " (another database on this server: give the gateway a server of its own, or end it)"
PRUNE_EVERY = 60.0
SILENCE_EVERY = 5.0  # seconds between looks for clusters gone silent


class HoldBackWatch:
    """Since when committed changes wait behind an open transaction; logs the blocker after a while."""

    def __init__(self, reader: OutboxReader, figures: PartitionFigures) -> None:
        self.reader = reader
        self.figures = figures
        self.held_since: float | None = None  # monotonic
        self.blocker: Blocker | None = None
        self._logged_at = 0.0

    async def observe(self, result: ReadResult, now: float) -> None:
        if result.held_back:
            held_since = self.held_since = self.held_since or now
            if now - held_since > HELD_BACK_LOG_AFTER and now - self._logged_at > HELD_BACK_LOG_EVERY:
                self._logged_at = now
                blocker = self.blocker = await self.reader.blocker(result.horizon)
                if blocker is not None:
                    log.warning(
                        "relay held back %.1fs by open transaction xid=%d pid=%d in database %s%s (%s, open %.1fs): %s",
                        now - held_since,
                        blocker.xid,
                        blocker.pid,
                        blocker.database or "-",
                        ELSEWHERE if blocker.elsewhere else "",
                        blocker.state,
                        blocker.age_seconds,
                        blocker.query,
                    )
        else:
            self.held_since = None
            self.blocker = None
        self.figures.held_since = self.held_since
        self.figures.holder = self.blocker


class Heartbeat:
    """What /readyz on every node reads of the relay: a heartbeat, lag, what holds it back. (Its /metrics
    figures are its own: gateway.relay.metrics.)"""

    def __init__(self, write: Callable[[RelayStats], Awaitable[None]], figures: PartitionFigures) -> None:
        self.write = write
        self.figures = figures
        self._written_at = 0.0

    async def beat(self, now: float, core: Batcher, published: int, watch: HoldBackWatch) -> None:
        """Write the figures if the last write is a second old; Redis away, skip (the next beat tries again)."""
        if now - self._written_at < STATS_EVERY:
            return
        self._written_at = now
        held_since, blocker = watch.held_since, watch.blocker
        stats = RelayStats(
            epoch=core.epoch,
            heartbeat=time.time(),
            lag_seconds=round(self.figures.lag, 4),
            changes=core.changes_applied,
            deltas=core.deltas_taken,
            published=published,
            held_back_seconds=round(now - held_since, 3) if held_since is not None else 0,
            blocker_pid=blocker.pid if blocker else 0,
            blocker_xid=blocker.xid if blocker else 0,
        )
        try:
            await self.write(stats)
        except BusError:
            pass


class Housekeeping:
    """Prunes the partition's published outbox rows; partition 0 sweeps jobs past retention and prunes the
    activity past GATEWAY_ACTIVITY_DAYS."""

    def __init__(
        self,
        reader: OutboxReader,
        retention: float,
        job_retention: float,
        silent_after: float = 120.0,
        activity_days: float = 90.0,
    ) -> None:
        self.reader = reader
        self.db = reader.db
        self.partition = reader.partition
        self.partitions = reader.count
        self.retention = retention  # outbox rows are kept this long after they were published
        self.job_retention = job_retention  # a job is listed this long after its last change
        self.silent_after = silent_after  # a cluster heard from no longer than this ago is silent
        self.activity_days = activity_days  # who did what is kept this many days
        self.every = min(PRUNE_EVERY, retention / 2, job_retention / 4)
        self.silence_every = min(SILENCE_EVERY, silent_after / 4)
        self._published_at: deque[tuple[float, str]] = deque()  # (when, outbox cursor) per cycle with changes
        self._last = self._silence_last = time.monotonic()

    async def after_cycle(self, result: ReadResult, now: float) -> None:
        if result.changes:
            self._published_at.append((now, self.reader.position))
        if now - self._last > self.every:
            self._last = now
            await self._prune(now)
            if self.partition == 0:  # one sweep for all: it changes jobs, whose changes reach each partition
                await maintenance.sweep_jobs(self.db, self.job_retention)
                await activity.prune(self.db, self.activity_days)
        if self.partition == 0 and now - self._silence_last > self.silence_every:
            self._silence_last = now
            for silent in await clusters.mark_silent(self.db, self.silent_after):
                log.warning(
                    "cluster %s (id %d, team %d) silent since %s: its unfinished jobs are listed as silent",
                    silent.name,
                    silent.id,
                    silent.team_id,
                    silent.silent_since.isoformat(timespec="seconds"),
                )

    async def _prune(self, now: float) -> None:
        """Delete outbox rows published more than `retention` seconds ago, in small batches."""
        cutoff: str | None = None
        while self._published_at and now - self._published_at[0][0] > self.retention:
            cutoff = self._published_at.popleft()[1]
        if cutoff is not None:
            await maintenance.prune_outbox(self.db, cutoff, self.partitions, self.partition)
