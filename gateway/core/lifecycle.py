"""How a submission moves through its twelve statuses: the one transition table, which the Submissions page's
diagram is drawn from (gateway.web.team.lifecycle) and the ingest API checks a cluster's staging reports against.

Each move has a cause:

| cause | what makes the move | checked |
|---|---|---|
| `cluster` | the cluster staging the submission reports where its data is (`staging`), or that its results were downloaded | its `staging` moves, at `POST /api/ingest/submissions/<id>` |
| `tasks` | the submission's tasks change (`submission_status` derives the status from their counts) | each task's report, by the job rules |
| `action` | a person's action on the Submissions page, once the clusters confirm it | by the action |

A cluster may report a staging step further along the data's path than the next one (the steps between are
taken as passed: a quick upload is never seen `uploading`); it may not report one the path does not reach from
where the submission is (a synced submission's data never goes back to uploading). The derived moves are not
checked as they stream: a relay folds a tick's task changes into one row, so two ticks may be several moves
apart; the table lists the moves one event makes, each of them a move `submission_status` really makes (the unit
tests hold it to that).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from .submission import STAGING

Cause = Literal["cluster", "tasks", "action"]
START = "submitted"  # not a status: where the arrows into a submission's first status begin
READY = "ready"  # the staging of a submission whose data is in place: its status then comes from its tasks


class Transition(NamedTuple):
    source: str  # a status of SUBMISSION_STATUSES, or START
    target: str  # a status of SUBMISSION_STATUSES
    label: str  # what makes the move, in the Submissions page's words
    cause: Cause
    staging: str | None = None  # the staging a cluster reports for this move (the moves the ingest API checks)


# The statuses and their meaning are the Submissions document's; the labels name its menu's actions as it does.
# An action's move lists every action of the menu that makes it ("Unhold, Retry"); a move the tasks make and an
# action makes too (running to failed: a task fails, or Kill) is two arrows.
TRANSITIONS: tuple[Transition, ...] = (
    Transition(START, "upload_pending", "submitted", "cluster", "upload_pending"),
    Transition(START, "pending", "submitted, its data in place", "cluster", READY),
    Transition("upload_pending", "uploading", "upload starts", "cluster", "uploading"),
    Transition("uploading", "sync_pending", "uploaded", "cluster", "sync_pending"),
    Transition("sync_pending", "syncing", "storage deployed", "cluster", "syncing"),
    Transition("syncing", "sync_failed", "sync fails", "cluster", "sync_failed"),
    # The cluster's own operator may retry too: the cluster then reports `syncing` itself.
    Transition("sync_failed", "syncing", "Retry Sync", "action", "syncing"),
    Transition("syncing", "pending", "synced", "cluster", READY),
    Transition("pending", "running", "a task starts", "tasks"),
    Transition("running", "success", "all tasks done", "tasks"),
    Transition("running", "failed", "a task fails", "tasks"),
    Transition("running", "preempted", "a node is preempted", "tasks"),
    Transition("success", "downloaded", "downloaded", "cluster"),
    # Hold stops the tasks that wait; Kill stops every task not done, wherever the submission stands.
    Transition("pending", "holding", "Hold", "action"),
    Transition("running", "holding", "Hold", "action"),
    Transition("holding", "pending", "Unhold, Retry", "action"),
    Transition("holding", "running", "Unhold", "action"),
    Transition("pending", "failed", "Kill", "action"),
    Transition("running", "failed", "Kill", "action"),
    Transition("holding", "failed", "Kill", "action"),
    # Retry restarts every task (pending again); the other retries restart some, and a run with tasks done is
    # running again. A retry takes the downloaded mark off: the new results are downloaded again.
    Transition("running", "pending", "Retry", "action"),
    Transition("success", "pending", "Retry", "action"),
    Transition("downloaded", "pending", "Retry", "action"),
    Transition("failed", "pending", "Retry Failed, Retry", "action"),
    Transition("failed", "running", "Retry Failed", "action"),
    Transition("preempted", "pending", "Retry Preempted, Retry", "action"),
    Transition("preempted", "running", "Retry Preempted", "action"),
)

# What each status means, in the Submissions document's words (a node's tooltip in the diagram).
MEANINGS: dict[str, str] = {
    "upload_pending": "The job specification has been submitted but render data has yet to start uploading.",
    "uploading": "Render data is being transferred to cloud storage.",
    "sync_pending": "Deploying a high performance storage cluster for the render data.",
    "sync_failed": "Syncing to the high performance storage cluster failed. The job will remain in that state until"
    " a retry sync operation is requested by right-clicking on a job or task.",
    "syncing": "Render data is being copied from cloud storage to the high performance storage system.",
    "pending": "Render nodes are being herded and reserved for the job.",
    "holding": "The job or task is on hold, right-click to unhold.",
    "running": "The job has actively running tasks.",
    "success": "All tasks have rendered successfully.",
    "downloaded": "All successful tasks have been downloaded.",
    "failed": "At least one task has failed.",
    "preempted": "At least one task was preempted, use the retry option to automatically retry preempted tasks.",
}

# A submission's status in the colour the Submissions page shows it in (frontend/js/submissions.js,
# STATUS_COLOUR; the browser tests hold the two equal); "" is the page's plain text.
STATUS_COLOURS: dict[str, str] = {
    "upload_pending": "",
    "uploading": "",
    "sync_pending": "",
    "syncing": "",
    "sync_failed": "red",
    "pending": "amber",
    "holding": "amber",
    "running": "blue",
    "success": "green",
    "downloaded": "green",
    "failed": "red",
    "preempted": "red",
}


def _node(staging: str) -> str:
    """The status a staging stands for in the table: its own, or (ready) where a synced submission arrives."""
    return staging if staging in STAGING else "pending"


def staging_next(staging: str) -> list[str]:
    """The stagings a cluster reports next from `staging`, in the table's order."""
    return [t.staging for t in TRANSITIONS if t.staging is not None and t.source == _node(staging)]


def staging_reachable(staging: str) -> set[str]:
    """Every staging a cluster may report for a submission at `staging`: itself (a report said again) and those
    the table reaches from it by staging moves (the steps between taken as passed)."""
    reached, todo = {staging}, [staging]
    while todo:
        for following in staging_next(todo.pop()):
            if following not in reached:
                reached.add(following)
                todo.append(following)
    return reached


def staging_refusal(submission_id: int, current: str, requested: str) -> str | None:
    """Why a cluster may not move a submission's data from `current` to `requested` (None: it may); the text
    names both and what may follow, and is safe to return to the cluster."""
    if requested in staging_reachable(current):
        return None
    following = staging_next(current)
    after = f"from {current} it moves to {' or '.join(following)}" if following else "its data is in place"
    return f"staging: submission {submission_id} cannot move from {current} to {requested}; {after}"
