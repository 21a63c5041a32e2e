"""Acting on jobs through the clusters: the messages exchanged, and the toast a person reads.

An action (Remove Running Jobs, Retry Failed Jobs) becomes one command per cluster that holds the jobs; each
cluster answers with the jobs it acted on. Only confirmed jobs change. A cluster that did not confirm in time may
still have acted (its reports tell): its part is "not confirmed yet", never a count of zero, and the answer says
which jobs it was asked about so the browser can follow their reports and update the toast in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

import msgspec

from .types import Id, Text

Action = Literal["remove", "retry"]
REMOVABLE = ("queued", "retrying", "running", "holding")  # Remove Running Jobs takes holding ones too
# Retry Failed Jobs takes what the Jobs view counts as Failed: failed jobs, and preempted ones (their clusters
# get `retry_failed` for the first and `retry_preempted` for the second).
RETRYABLE = ("failed", "preempted")
Level = Literal["success", "warning", "info"]


class Confirmation(msgspec.Struct, forbid_unknown_fields=True):
    """Cluster -> gateway, `POST /api/ingest/confirmations`: the jobs of a command it acted on (the others it did
    not have, or could not act on). The cluster is its key's."""

    command: Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
    jobs: Annotated[list[Id], msgspec.Meta(max_length=100_000)]


class Confirmed(msgspec.Struct):
    """What the waiting node hears of a recorded confirmation (inside the gateway, on the bus)."""

    cluster_id: int
    jobs: list[int]


class Asked(msgspec.Struct, array_like=True):
    """A job a cluster was asked to act on (`[id, trajectory, attempts]` on the wire): where its reports arrive,
    and the attempt it was on (a retry shows as a later one)."""

    id: int
    trajectory: int
    attempts: int


WATCHED = 10_000  # jobs an answer names for the browser to follow; past it, only their count


class Pending(msgspec.Struct):
    """A cluster's part that is not confirmed yet: `count` things it was asked to act on (`jobs`: which, when they
    are jobs, up to WATCHED of an answer's; `submissions`: which, when they are submissions, as Retry Sync's), and
    how long it has been silent (None: it reports)."""

    cluster: str
    count: int
    jobs: list[Asked] = []
    silent_seconds: float | None = None
    submissions: list[int] = []


# What a job shows once an action is done on it, as the browser follows it: it leaves the list (removed), it is
# held, released, failed (killed), or on a later attempt (a retry); a submission whose sync is retried is syncing
# (its row's status leaves sync_failed).
Becomes = Literal["", "removed", "holding", "released", "failed", "next_attempt", "syncing"]


class ActionResult(msgspec.Struct, omit_defaults=True):
    """What an action did, and the toast that says so (`message`, word for word, styled by `level`). The fields
    for the browser's update in place are left out of an answer that has nothing pending."""

    message: str  # the toast, word for word
    acted: int  # how many things really changed (confirmed)
    unconfirmed: list[str]  # clusters that did not confirm in time
    # success: everything it found changed; warning: some did not, or is not known yet (a cluster did not
    # confirm, or did not act); info: there was nothing to act on.
    level: Level  # always said (a tool may read the level alone)
    # For the browser's update in place while `pending` parts are not confirmed: how many were found, the toast's
    # words once counted (`done`, `{n}` the count) and while nothing is (`doing`), and what a done job shows.
    found: int = 0
    done: str = ""
    doing: str = ""
    becomes: Becomes = ""
    pending: list[Pending] = []
    # What follows the count once every job found is done ("(9 of them preempted)"), as the confirmed toast says it.
    note: str = ""


def silent_for(seconds: float) -> str:
    """How long a cluster has been silent, in a person's words."""
    minutes = int(seconds // 60)
    if minutes < 1:
        return "under a minute"
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h"


def outcome(
    done: str,
    found: int,
    acted: int,
    *,
    nothing: str,
    note: str = "",
    pending: Sequence[Pending] = (),
    doing: str = "",
    becomes: Becomes = "",
    whole_note: str = "",
) -> ActionResult:
    """Every action's toast, from what it found and what really changed.

    `done` holds `{n}`: the count changed, written `3 of 5` when fewer changed than were found. `nothing` is the
    whole toast when nothing qualified. `note` follows the count (say, how many of them were preempted). Success
    only when everything found changed.

    `pending`: the parts of clusters that did not confirm, each with how many of those found it was asked about.
    Such a cluster may have acted (its reports tell), so its part is counted neither way: "2 on gpu-2 not
    confirmed yet"; when nothing is confirmed the toast says what is being done (`doing`, `{n}` all found).
    `whole_note` is `note` for every job found, which the browser adds once its reports show them all done.
    """
    if pending:
        result = _pending_outcome(done, found, acted, pending, note=note, doing=doing or done, becomes=becomes)
        result.note = whole_note
        return result
    if not found:
        return ActionResult(message=nothing, acted=0, unconfirmed=[], level="info")
    n = f"{acted}" if acted == found else f"{acted} of {found}"
    level: Level = "success" if acted == found else "warning"
    return ActionResult(message=f"{done.format(n=n)}{note}", acted=acted, unconfirmed=[], level=level)


def _pending_outcome(
    done: str, found: int, acted: int, pending: Sequence[Pending], *, note: str, doing: str, becomes: Becomes
) -> ActionResult:
    parts = sorted(pending, key=lambda p: p.cluster)
    names = [p.cluster for p in parts]
    settled = found - sum(p.count for p in parts)  # what the clusters that confirmed answered for
    if acted == 0 and settled <= 0:
        head = f"{doing.format(n=found)} on {and_list(names)}: not confirmed yet"
    else:
        n = f"{acted}" if acted >= settled else f"{acted} of {settled}"
        waiting = "; ".join(f"{p.count} on {p.cluster}" for p in parts)
        head = f"{done.format(n=n)}{note}; {waiting} not confirmed yet"
    quiet = "".join(
        f"; cluster {p.cluster} is silent (nothing heard for {silent_for(p.silent_seconds)})"
        for p in parts
        if p.silent_seconds is not None
    )
    return ActionResult(
        message=head + quiet,
        acted=acted,
        unconfirmed=names,
        level="warning",
        found=found,
        done=done,
        doing=doing,
        becomes=becomes,
        pending=parts,
    )


def not_deleted(plugin: str, stopped: ActionResult) -> ActionResult:
    """Delete analysis whose jobs a cluster has not confirmed stopping: nothing is deleted, and the toast says what
    is known of each cluster's part (never "0 of N" for jobs a cluster may well have stopped)."""
    parts = stopped.pending
    waiting = and_list([f"{p.count} on {p.cluster}" if p.count else p.cluster for p in parts])
    done = f"{stopped.acted} job(s) stopped, " if stopped.acted else ""
    quiet = "".join(
        f"; cluster {p.cluster} is silent (nothing heard for {silent_for(p.silent_seconds)})"
        for p in parts
        if p.silent_seconds is not None
    )
    return ActionResult(
        message=f"{plugin} not deleted yet: {done}{waiting} not confirmed yet{quiet}; delete it again once they have"
        " stopped",
        acted=stopped.acted,
        unconfirmed=stopped.unconfirmed,
        level="warning",
    )


def and_list(names: Sequence[str]) -> str:
    """ "gpu-2", "gpu-2 and tape-9", "cpu-big, gpu-2 and tape-9"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def toast(
    action: Action,
    found: int,
    acted: int,
    preempted: int = 0,
    pending: Sequence[Pending] = (),
    preempted_found: int = 0,
) -> ActionResult:
    """Remove Running Jobs and Retry Failed Jobs (or Frames): found is how many jobs qualified, acted how many
    changed, preempted how many of those were preempted ones (`preempted_found`: of all found); `pending` the parts
    not confirmed yet."""
    if action == "remove":
        return outcome(
            "Removed {n} job(s)",
            found,
            acted,
            nothing="No queued or running jobs found",
            pending=pending,
            doing="Removing {n} job(s)",
            becomes="removed",
        )
    return outcome(
        "Queued {n} failed job(s) for retry",
        found,
        acted,
        nothing="No failed jobs found to retry",
        note=f" ({preempted} of them preempted)" if preempted else "",
        pending=pending,
        doing="Queueing {n} failed job(s) for retry",
        becomes="next_attempt",
        whole_note=f" ({preempted_found} of them preempted)" if preempted_found else "",
    )


confirmation_decoder = msgspec.json.Decoder(Confirmation)
confirmed_decoder = msgspec.json.Decoder(Confirmed)


# -- the Submissions page's actions, on submissions or on tasks


class TaskAction(msgspec.Struct, frozen=True):
    """Which tasks an action takes, what they become once their cluster confirms, and what the toast says."""

    name: str
    takes: tuple[str, ...]  # task statuses it applies to
    becomes: str  # the status a confirmed task gets
    verb: str  # the toast: f"{verb} {n} task(s)"
    doing: str  # the toast while nothing is confirmed: f"{doing} {n} task(s)"
    shows: Becomes  # what a done task shows, as the browser follows it
    new_attempt: bool = False  # a retry starts the next attempt


TASK_ACTIONS: dict[str, TaskAction] = {
    a.name: a
    for a in (
        TaskAction(
            name="hold", takes=("queued", "retrying"), becomes="holding", verb="Held", doing="Holding", shows="holding"
        ),
        TaskAction(
            name="unhold", takes=("holding",), becomes="queued", verb="Released", doing="Releasing", shows="released"
        ),
        TaskAction(
            name="kill",
            takes=("queued", "retrying", "running", "holding"),
            becomes="failed",
            verb="Killed",
            doing="Killing",
            shows="failed",
        ),
        TaskAction(
            name="retry",
            takes=("completed", "failed", "preempted", "queued", "retrying", "running", "holding"),
            becomes="retrying",
            verb="Queued for retry",
            doing="Queueing for retry",
            shows="next_attempt",
            new_attempt=True,
        ),
        TaskAction(
            name="retry_failed",
            takes=("failed",),
            becomes="retrying",
            verb="Queued failed for retry",
            doing="Queueing failed for retry",
            shows="next_attempt",
            new_attempt=True,
        ),
        TaskAction(
            name="retry_preempted",
            takes=("preempted",),
            becomes="retrying",
            verb="Queued preempted for retry",
            doing="Queueing preempted for retry",
            shows="next_attempt",
            new_attempt=True,
        ),
    )
}
KILLED = "Killed by a user"  # the error a killed task shows


class SubmissionsAction(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /api/submissions/actions`: one action on selected submissions, or on selected tasks."""

    action: Literal[
        "hold",
        "unhold",
        "kill",
        "retry",
        "retry_failed",
        "retry_preempted",
        "retry_sync",
        "reviewed",
        "priority",
        "instance_type",
    ]
    submissions: Annotated[list[Id], msgspec.Meta(max_length=1000)] = []
    tasks: Annotated[list[Id], msgspec.Meta(max_length=100_000)] = []
    priority: Annotated[int, msgspec.Meta(ge=-1000, le=1000)] | None = None
    instance_type: Annotated[Text, msgspec.Meta(min_length=1, max_length=64)] | None = None
    # The instance type decides cores and memory; given, they must match it.
    cores: Annotated[int, msgspec.Meta(ge=1, le=1024)] | None = None
    memory_gb: Annotated[int, msgspec.Meta(ge=1, le=16384)] | None = None
    reviewed: bool = True  # Reviewed: false takes the mark away again


class ClusterShare(msgspec.Struct):
    name: str
    tasks: int
    # Seconds since a silent cluster was last heard from (None: it reports): it may not act until it reports again,
    # and the confirmation says so before anything is done.
    silent_seconds: float | None = None


class ActionPreview(msgspec.Struct, kw_only=True):
    """What a task action would take, before a person confirms it: `tasks` tasks of `submissions` selected
    submissions, held by `clusters` (each with its share). Nothing is done."""

    action: str
    tasks: int
    submissions: int
    clusters: list[ClusterShare]


def task_toast(
    action: TaskAction,
    found: int,
    acted: int,
    pending: Sequence[Pending] = (),
) -> ActionResult:
    return outcome(
        _task_words(action.verb),
        found,
        acted,
        nothing=f"No tasks to {action.name.replace('_', ' ')}",
        pending=pending,
        doing=_task_words(action.doing),
        becomes=action.shows,
    )


def edit_toast(
    what: str, doing: str, found: int, changed: int, unsettled: int, pending: Sequence[Pending], note: str = ""
) -> ActionResult:
    """Edit / Priority and Edit / Instance Type (`what`: "Priority set to 5", `doing`: "Setting priority to 5"):
    recorded on `changed` of the `found` submissions selected, of which `unsettled` wait on a cluster that has not
    confirmed (`pending`: each with how many submissions' tasks it holds). Those are not confirmed yet, never counted
    as done or as not done."""
    return outcome(
        f"{what} on {{n}} submission(s)",
        found,
        changed - unsettled,
        nothing="No submissions to edit",
        note=note,
        pending=[p for p in pending if p.count],
        doing=f"{doing} on {{n}} submission(s)",
    )


def _task_words(verb: str) -> str:
    """ "Held {n} task(s)"; "Queued {n} failed task(s) for retry" (the kind of task between count and end)."""
    for start in ("Queued", "Queueing"):
        if verb.startswith(start + " "):
            kind = verb.removeprefix(start).removesuffix("for retry").strip()
            return f"{start} {{n}} {kind + ' ' if kind else ''}task(s) for retry"
    return f"{verb} {{n}} task(s)"
