"""Job reports from clusters: their schema, and the rules that decide whether a report still applies.

The same rules hold in SQL (gateway.store.ingest); here they fold several reports about one job in one
batch into the one that wins, in order.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec

from .status import TERMINAL, Kind, Status
from .types import Id, Text

MAX_REPORTS = 10_000
# Text a cluster sends is bounded, in characters (docs/protocol.md lists every bound): past it, 422 naming the field.
MAX_ERROR = 4000
MAX_NAME = 200


class JobReport(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Create a job (no `id`) or report on one (`id`), about attempt `attempt`."""

    status: Status
    id: Id | None = None
    attempt: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 1
    error: Annotated[Text, msgspec.Meta(max_length=MAX_ERROR)] | None = None
    # The cluster removed the job (a person's Remove Running Jobs, or its own operator): it leaves every list,
    # as when the gateway applies a confirmed removal; reported whether or not the command's reply arrived.
    removed: bool = False
    # When the worker started this attempt: a job whose `running` and `completed` came in one batch (its running
    # report folded away) keeps how long it took. Read only for a job the gateway saw no start of.
    started_at: Annotated[datetime, msgspec.Meta(tz=True)] | None = None
    # Only when creating:
    trajectory_id: Id | None = None
    kind: Kind | None = None
    name: Annotated[Text, msgspec.Meta(min_length=1, max_length=MAX_NAME)] | None = None
    frame: Annotated[int, msgspec.Meta(ge=0, le=10_000_000)] | None = None
    timestep: float | None = None
    analysis_id: Id | None = None  # of the job's own trajectory
    submission_id: Id | None = None  # else derived (one per trajectory and work)


class IngestBatch(msgspec.Struct, forbid_unknown_fields=True):
    jobs: Annotated[list[JobReport], msgspec.Meta(min_length=1, max_length=MAX_REPORTS)]


class IngestResult(msgspec.Struct):
    id: int
    result: str  # created | updated | ignored


class IngestResponse(msgspec.Struct):
    created: int
    updated: int
    ignored: int
    jobs: list[IngestResult]


class NewTrajectory(msgspec.Struct, forbid_unknown_fields=True):
    """A cluster that stores an uploaded trajectory registers it."""

    name: Annotated[Text, msgspec.Meta(min_length=1, max_length=MAX_NAME)]


class NewAnalysis(msgspec.Struct, forbid_unknown_fields=True):
    """A pipeline run registers each analysis it computes."""

    trajectory_id: Id
    plugin: Annotated[Text, msgspec.Meta(min_length=1, max_length=200)]


Staging = Literal["upload_pending", "uploading", "sync_pending", "syncing", "sync_failed", "ready"]


class NewSubmission(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A batch of work a tool submits; its jobs then name it (`submission_id`)."""

    title: Annotated[Text, msgspec.Meta(min_length=1, max_length=300)]
    project: Annotated[Text, msgspec.Meta(max_length=200)] = ""
    trajectory_id: Id | None = None
    user_id: Id | None = None
    priority: Annotated[int, msgspec.Meta(ge=-1000, le=1000)] = 0
    instance_type: Annotated[Text, msgspec.Meta(min_length=1, max_length=64)] = "standard"
    cores: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 4
    memory_gb: Annotated[int, msgspec.Meta(ge=1, le=16384)] = 16
    preemptible: bool = False
    staging: Staging = "ready"


class SubmissionUpdate(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Where a submission's data is (the cluster staging it), or that its results were downloaded."""

    staging: Staging | None = None
    downloaded: bool | None = None


class InvalidReport(ValueError):
    """A batch that cannot be applied; the text names the bad field and is safe to return."""


def check_new_job(index: int, report: JobReport) -> None:
    missing = [f for f in ("trajectory_id", "kind", "name") if getattr(report, f) is None]
    if missing:
        raise InvalidReport(f"jobs[{index}]: a new job needs {', '.join(missing)}")
    if report.removed:
        raise InvalidReport(f"jobs[{index}].removed: a new job cannot be removed (name the job's id)")


def report_applies(attempts: int, status: str, removed: bool, attempt: int, new_status: str) -> bool:
    """Whether a report about `attempt` moves a job that is at `attempts` in `status`."""
    if removed or attempt < attempts:
        return False  # a removed job stays removed; a stale attempt's report is ignored
    if attempt > attempts:
        return True  # a retry starts a new attempt
    if status in TERMINAL:
        return False  # a terminal status sticks unless the job is retried
    if status == "running" and new_status in ("queued", "retrying"):
        return False  # a late `queued` never undoes `running`
    return True
