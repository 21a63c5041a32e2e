"""Job statuses, the buckets they count in, and the colour of a group of jobs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple

Status = Literal["queued", "retrying", "running", "completed", "failed", "holding", "preempted"]
Kind = Literal[
    "preprocess",
    "rasterize",
    "analysis",
    "artifact_upload",
    "trajectory_transfer",
    "analysis_transfer",
    "storage_transfer",
]
Bucket = Literal["queued", "running", "silent", "done", "failed"]
GroupStatus = Literal["running", "queued", "silent", "completed", "failed", "neutral", "empty"]

STATUSES: tuple[Status, ...] = ("queued", "retrying", "running", "completed", "failed", "holding", "preempted")
KINDS: tuple[Kind, ...] = (
    "preprocess",
    "rasterize",
    "analysis",
    "artifact_upload",
    "trajectory_transfer",
    "analysis_transfer",
    "storage_transfer",
)
# A job's listed status when its cluster has gone silent (no report and no metrics for a while) while the job
# was queued, retrying or running: nobody knows what it does, so it is neither Running nor Queued. Never stored
# nor reported: PostgreSQL derives it from the job's `silent_since` (sql/012_cluster_silence.sql), and the job
# shows its stored status again once its cluster reports.
SILENT = "silent"
LISTED: tuple[str, ...] = (*STATUSES, SILENT)  # every status a count or a delta can carry
SILENCEABLE: frozenset[str] = frozenset({"queued", "retrying", "running"})
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "preempted"})
# A holding task keeps its trajectory unfinished: it still has work to do once released; so does a silent one.
ACTIVE: frozenset[str] = frozenset({"queued", "retrying", "running", "holding", SILENT})
FAILED: frozenset[str] = frozenset({"failed", "preempted"})  # a wave with these ends with errors

MAX_ATTEMPTS = 3  # a trajectory frame job gets up to three attempts before it is marked failed


def after_failure(attempts: int) -> tuple[str, int]:
    """A failed attempt's outcome: `retrying` with the next attempt while attempts remain, else `failed`."""
    if attempts < MAX_ATTEMPTS:
        return "retrying", attempts + 1
    return "failed", attempts


def attempt_label(attempts: int) -> str:
    """Which attempt a job is on, from the second: `attempt 2 of 3`; past its automatic attempts (a person
    retried it) just `attempt 4`; nothing on its first."""
    if attempts <= 1:
        return ""
    return f"attempt {attempts} of {MAX_ATTEMPTS}" if attempts <= MAX_ATTEMPTS else f"attempt {attempts}"


BUCKET_OF: dict[str, Bucket] = {
    "queued": "queued",
    "retrying": "queued",
    "running": "running",
    "completed": "done",
    "failed": "failed",
    "holding": "queued",  # on hold: it waits, like a queued task, until released
    "preempted": "failed",  # its node was taken away; not retried by itself (Retry Preempted does)
    SILENT: "silent",  # counted apart: its cluster stopped reporting
}


def buckets(counts: Mapping[str, int]) -> dict[Bucket, int]:
    """Counts per status folded into the buckets a person sees: Queued, Running, Silent, Done, Failed."""
    out: dict[Bucket, int] = {"queued": 0, "running": 0, "silent": 0, "done": 0, "failed": 0}
    for status, n in counts.items():
        out[BUCKET_OF[status]] += n
    return out


def group_status(counts: Mapping[str, int]) -> GroupStatus:
    """The colour of a trajectory or a frame, from the counts per status of its jobs."""
    b = buckets(counts)
    return bucket_status(b["queued"], b["running"], b["done"], b["failed"], b["silent"])


def bucket_status(queued: int, running: int, done: int, failed: int, silent: int = 0) -> GroupStatus:
    """The colour of a group from its bucket totals (`group_status`'s rule; `Counts.status` folds its fields)."""
    if running:
        return "running"
    if queued:
        return "queued"
    if silent:
        return "silent"  # its only unfinished work is on a cluster that stopped reporting
    if not done and not failed:
        return "empty"
    if not failed:
        return "completed"
    if not done:
        return "failed"
    return "neutral"  # partly done, partly failed


class Shown(NamedTuple):
    """How a status is shown: its word (colour is never the only signal) and its colour."""

    word: str
    colour: str


# The one table of what a person sees for each status, a job's and a group's. The browser's mirror
# (frontend/js/rules.js) and this one both pass the JSON vectors' `statuses` table, which lists every status.
SHOWN: dict[str, Shown] = {
    "queued": Shown("queued", "amber"),
    "retrying": Shown("retrying", "amber"),
    "running": Shown("running", "blue"),
    "completed": Shown("completed", "green"),
    "failed": Shown("failed", "red"),
    "holding": Shown("holding", "amber"),  # on hold: waits like a queued job
    "preempted": Shown("preempted", "red"),  # counted as Failed
    SILENT: Shown("cluster silent", "grey"),  # its cluster stopped reporting; the row says since when
    # A group's status only:
    "neutral": Shown("partly failed", "neutral"),  # partly done and partly failed
    "empty": Shown("", "neutral"),
}
COLOURS: dict[str, str] = {status: shown.colour for status, shown in SHOWN.items()}


def listed_status(status: str, silent_since: object) -> str:
    """The status a job is listed and counted with: `silent` while its cluster is silent and the job unfinished
    (PostgreSQL's job_listed_status, sql/012_cluster_silence.sql)."""
    return SILENT if silent_since is not None and status in SILENCEABLE else status


def colour(status: str) -> str:
    """The colour of a job's status or a group's status: amber queued, blue running, green done, red failed."""
    return COLOURS.get(status, "neutral")


def word(status: str) -> str:
    """The word shown next to the colour; a status no table knows yet shows as itself, never as nothing."""
    shown = SHOWN.get(status)
    return status if shown is None else shown.word


def ring_fill(counts: Mapping[str, int]) -> float:
    """How full the header ring is: Done over the jobs listed."""
    total = sum(counts.values())
    return buckets(counts)["done"] / total if total else 0.0


def ring_label(counts: Mapping[str, int]) -> str:
    """The header ring's label: `N running` while any runs, else `N queued` while any waits, else `N silent`
    while unfinished jobs sit on clusters that stopped reporting, else `Jobs`."""
    b = buckets(counts)
    if b["running"]:
        return f"{b['running']} running"
    if b["queued"]:
        return f"{b['queued']} queued"
    if b["silent"]:
        return f"{b['silent']} silent"
    return "Jobs"
