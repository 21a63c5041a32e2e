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
Bucket = Literal["queued", "running", "done", "failed"]
GroupStatus = Literal["running", "queued", "completed", "failed", "neutral", "empty"]

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
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "preempted"})
# A holding task keeps its trajectory unfinished: it still has work to do once released.
ACTIVE: frozenset[str] = frozenset({"queued", "retrying", "running", "holding"})
FAILED: frozenset[str] = frozenset({"failed", "preempted"})  # a wave with these ends with errors

MAX_ATTEMPTS = 3  # a trajectory frame job gets up to three attempts before it is marked failed


def after_failure(attempts: int) -> tuple[str, int]:
    """A failed attempt's outcome: `retrying` with the next attempt while attempts remain, else `failed`."""
    if attempts < MAX_ATTEMPTS:
        return "retrying", attempts + 1
    return "failed", attempts


BUCKET_OF: dict[str, Bucket] = {
    "queued": "queued",
    "retrying": "queued",
    "running": "running",
    "completed": "done",
    "failed": "failed",
    "holding": "queued",  # on hold: it waits, like a queued task, until released
    "preempted": "failed",  # its node was taken away; not retried by itself (Retry Preempted does)
}


def buckets(counts: Mapping[str, int]) -> dict[Bucket, int]:
    """Counts per status folded into the four buckets a person sees: Queued, Running, Done, Failed."""
    out: dict[Bucket, int] = {"queued": 0, "running": 0, "done": 0, "failed": 0}
    for status, n in counts.items():
        out[BUCKET_OF[status]] += n
    return out


def group_status(counts: Mapping[str, int]) -> GroupStatus:
    """The colour of a trajectory or a frame, from the counts per status of its jobs."""
    b = buckets(counts)
    return bucket_status(b["queued"], b["running"], b["done"], b["failed"])


def bucket_status(queued: int, running: int, done: int, failed: int) -> GroupStatus:
    """The colour of a group from its bucket totals (`group_status`'s rule; `Counts.status` folds its fields)."""
    if running:
        return "running"
    if queued:
        return "queued"
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
    # A group's status only:
    "neutral": Shown("partly failed", "neutral"),  # partly done and partly failed
    "empty": Shown("", "neutral"),
}
COLOURS: dict[str, str] = {status: shown.colour for status, shown in SHOWN.items()}


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
    """The header ring's label: `N running` while any runs, else `N queued` while any waits, else `Jobs`."""
    b = buckets(counts)
    if b["running"]:
        return f"{b['running']} running"
    if b["queued"]:
        return f"{b['queued']} queued"
    return "Jobs"
