"""The unfinished work and recent durations a relay's takeover reads from PostgreSQL (gateway.store.eta) and
its estimates of time left (gateway.core.eta) start from."""

from __future__ import annotations

import msgspec


class WaitingWork(msgspec.Struct, array_like=True):
    """Unfinished jobs not running, as a relay's takeover reads them: one row per batch, kind and status."""

    cluster: int
    kind: str
    trajectory: int
    submission: int | None
    analysis: int | None
    status: str
    jobs: int


class RunningJob(msgspec.Struct, array_like=True):
    id: int
    cluster: int
    kind: str
    trajectory: int
    submission: int | None
    analysis: int | None
    started: float | None  # seconds since the Unix epoch


class RecentDurations(msgspec.Struct, array_like=True):
    cluster: int
    kind: str
    samples: int
    mean: float


class WorkSnapshot(msgspec.Struct, kw_only=True):
    """The unfinished work and recent durations as of the snapshot a relay's state is loaded from; `waiting` in
    the order the work arrived (its first job's id)."""

    waiting: list[WaitingWork] = msgspec.field(default_factory=list)
    running: list[RunningJob] = msgspec.field(default_factory=list)
    durations: list[RecentDurations] = msgspec.field(default_factory=list)
