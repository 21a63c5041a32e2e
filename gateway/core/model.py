"""The records that travel: a job as PostgreSQL holds it, a trajectory's summary, a team's counts."""

from __future__ import annotations

from datetime import datetime

import msgspec

from .status import GroupStatus, bucket_status


class Job(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A job's whole current state. Deltas are absolute: a client keeps the highest `version` per `id`.

    A job with `removed_at` set has left the list (removed by a person, or past retention).
    Unknown fields are ignored on decode, so a column added to `jobs` later does not break the relay.
    A field at its default (null, `attempts` 1) is left out of the wire: a fifth to a third of a delta's bytes,
    written once per subscriber (docs/protocol.md).
    """

    id: int
    team_id: int
    trajectory_id: int
    cluster_id: int
    kind: str
    name: str
    status: str
    version: int
    attempts: int = 1
    analysis_id: int | None = None
    submission_id: int | None = None
    frame: int | None = None
    timestep: float | None = None
    error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    removed_at: datetime | None = None
    removed_by: str | None = None  # who removed it (Remove Running Jobs), by name; None: its cluster, or retention
    # Its cluster's silence (no report since then) while the job is unfinished: listed as `silent` (core.status).
    silent_since: datetime | None = None


class Counts(msgspec.Struct, omit_defaults=False):
    """Absolute counts per status of the listed jobs."""

    queued: int = 0
    retrying: int = 0
    running: int = 0
    completed: int = 0
    failed: int = 0
    holding: int = 0
    preempted: int = 0
    silent: int = 0  # queued, retrying or running on a cluster that stopped reporting (core.status.SILENT)

    def add(self, status: str, n: int) -> None:
        setattr(self, status, getattr(self, status) + n)

    def total(self) -> int:
        return (
            self.queued
            + self.retrying
            + self.running
            + self.completed
            + self.failed
            + self.holding
            + self.preempted
            + self.silent
        )

    def active(self) -> int:
        return self.queued + self.retrying + self.running + self.holding + self.silent

    def as_dict(self) -> dict[str, int]:
        return msgspec.structs.asdict(self)

    def copy(self) -> Counts:
        """The counts as they are now (an aggregate's keep changing; a message's must not)."""
        return msgspec.structs.replace(self)

    def status(self) -> GroupStatus:
        """`group_status` of these counts, without building a dict (the relay asks per group per batch); the
        buckets as BUCKET_OF folds them (tests/unit/test_status.py holds the two equal for every status)."""
        return bucket_status(
            self.queued + self.retrying + self.holding,
            self.running,
            self.completed,
            self.failed + self.preempted,
            self.silent,
        )


def most_recent_first(summary: TrajectorySummary) -> tuple[float, int]:
    """The popover's order, as a sort key (reverse=True): the last change, then the id, so that every list of
    summaries (a snapshot, a page read over HTTP, the browser's) has one order and pages continue each other."""
    return (summary.updated_at.timestamp() if summary.updated_at else 0.0, summary.id)


class AnalysisEta(msgspec.Struct, kw_only=True):
    """An analysis with work left, and its estimated seconds left (None: unknown yet; gateway.core.eta)."""

    id: int
    eta: int | None


class Overrun(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A running job taking much longer than its kind usually takes on its cluster (gateway.core.eta,
    `longer_than_usual`)."""

    id: int
    times: int  # how many times the usual duration it has run so far, rounded
    user: int | None = None  # who submitted it (its submission's member; None: not a submission's task)


class TrajectorySummary(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One line of the team's Jobs popover: `name`, `completed/total`, group status, last change, and while it
    has work left its estimated time left. Fields at their default (null, false) are left out of the wire."""

    id: int
    name: str
    completed: int
    total: int
    status: str
    counts: Counts
    updated_at: datetime | None = None
    open: bool = False  # it holds storage transfers: its group opens by itself
    eta: int | None = None  # seconds left while it has work left (None: unknown, or nothing left; gateway.core.eta)
    analyses: list[AnalysisEta] | None = None  # its analyses with work left, most recent first
    stuck: int = 0  # its jobs running longer than usual (gateway.core.eta, `longer_than_usual`)
    overruns: list[Overrun] | None = None  # the first MAX_OVERRUNS of them, by job id
