"""Submissions: what a team submitted, one live row each, its status derived from its data and its tasks.

A submission's status, in order of precedence (the first that holds):

| status | when |
|---|---|
| `upload_pending`, `uploading`, `sync_pending`, `syncing`, `sync_failed` | its data is not on the cluster yet (the staging state) |
| `running` | any task runs (even if others failed: it is still at work) |
| `preempted` | any task was preempted (a retry of preempted tasks is needed) |
| `failed` | any task failed for good |
| `holding` | any task is holding (and none runs, failed or was preempted) |
| `running` | tasks wait (queued or retrying) after some completed: the run is under way between two tasks |
| `pending` | tasks wait for nodes to be reserved before any has completed: queued or retrying, none running |
| `downloaded` | all tasks completed and their results were downloaded |
| `success` | all tasks completed |

So `pending` is the time before a run's first task is done (the Submissions document's "render nodes are being
herded and reserved"), never 43 of 45 done: a Retry, which restarts every task, makes it pending again.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from .model import Counts

STAGING = ("upload_pending", "uploading", "sync_pending", "syncing", "sync_failed")
SUBMISSION_STATUSES = (*STAGING, "pending", "holding", "running", "success", "downloaded", "failed", "preempted")


def submission_status(staging: str, counts: Counts, downloaded: bool) -> str:
    if staging in STAGING:
        return staging
    if counts.running:
        return "running"
    if counts.preempted:
        return "preempted"
    if counts.failed:
        return "failed"
    if counts.holding:
        return "holding"
    if counts.queued or counts.retrying:
        return "running" if counts.completed else "pending"
    if counts.total() and counts.completed == counts.total():
        return "downloaded" if downloaded else "success"
    return "pending"


class SubmissionRecord(msgspec.Struct, kw_only=True):
    """A submission as PostgreSQL holds it (decoded from the outbox; unknown columns are ignored)."""

    id: int
    team_id: int
    trajectory_id: int | None = None
    user_id: int | None = None
    project: str = ""
    title: str
    priority: int = 0
    instance_type: str = "standard"
    cores: int = 4
    memory_gb: int = 16
    preemptible: bool = False
    staging: str = "ready"
    held: bool = False
    reviewed: bool = False
    downloaded_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    version: int = 1
    acted: str | None = None
    acted_by: int | None = None
    acted_by_name: str | None = None
    acted_at: datetime | None = None


class SubmissionRow(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One live row of the Submissions page: the record, its derived status and its tasks' aggregates. The
    fields with a default (`eta`, who last acted) are left out of the wire while unknown."""

    id: int
    trajectory_id: int | None
    user_id: int | None
    project: str
    title: str
    priority: int
    instance_type: str
    cores: int
    memory_gb: int
    preemptible: bool
    staging: str
    held: bool
    reviewed: bool
    downloaded: bool
    created_at: datetime | None
    updated_at: datetime | None
    status: str
    tasks: int
    counts: Counts
    avg_frame: float | None  # seconds a completed task took, on average
    version: int
    eta: int | None = None  # seconds left while tasks wait or run (None: unknown, or nothing left; gateway.core.eta)
    # The last task action on it (kill, hold, unhold, retry ...), by whom (the user, and their name then) and when:
    # "Killed by Ada Lovelace at 20:16" (sql/022_acted_by.sql). None: no one acted on it yet.
    acted: str | None = None
    acted_by: int | None = None
    acted_by_name: str | None = None
    acted_at: datetime | None = None


class SubmissionAggregate:
    """The relay's running totals for one submission."""

    __slots__ = ("record", "counts", "time_sum", "time_n", "last_change", "eta")

    def __init__(self, record: SubmissionRecord | None = None) -> None:
        self.record = record
        self.counts = Counts()
        self.time_sum = 0.0
        self.time_n = 0
        self.last_change: datetime | None = None
        self.eta: int | None = None  # as last published (gateway.core.eta)

    def row(self) -> SubmissionRow | None:
        r = self.record
        if r is None:
            return None
        return SubmissionRow(
            id=r.id,
            trajectory_id=r.trajectory_id,
            user_id=r.user_id,
            project=r.project,
            title=r.title,
            priority=r.priority,
            instance_type=r.instance_type,
            cores=r.cores,
            memory_gb=r.memory_gb,
            preemptible=r.preemptible,
            staging=r.staging,
            held=r.held,
            reviewed=r.reviewed,
            downloaded=r.downloaded_at is not None,
            created_at=r.created_at,
            updated_at=max((t for t in (r.updated_at, self.last_change) if t is not None), default=None),
            status=submission_status(r.staging, self.counts, r.downloaded_at is not None),
            tasks=self.counts.total(),
            counts=self.counts.copy(),
            avg_frame=round(self.time_sum / self.time_n, 3) if self.time_n else None,
            version=r.version,
            eta=self.eta if self.counts.active() else None,
            acted=r.acted,
            acted_by=r.acted_by,
            acted_by_name=r.acted_by_name,
            acted_at=r.acted_at,
        )
