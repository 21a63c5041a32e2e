"""Acting on jobs through the clusters: the messages exchanged, and the toast a person reads.

An action (Remove Running Jobs, Retry Failed Jobs) becomes one command per cluster that holds the jobs; each
cluster answers with the jobs it acted on. Only confirmed jobs change, and the toast names any cluster that
did not confirm in time.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .types import Id, Text

Action = Literal["remove", "retry"]
REMOVABLE = ("queued", "retrying", "running", "holding")  # Remove Running Jobs takes holding ones too
RETRYABLE = ("failed",)  # not preempted ones: Retry Preempted does those


class Command(msgspec.Struct, tag_field="type", tag="command", omit_defaults=True):
    """Gateway -> cluster, on the cluster's command channel.

    `action`: remove, retry (Jobs view); hold, unhold, kill, retry, retry_failed, retry_preempted, priority,
    instance_type, sync (Submissions page). `jobs` are the tasks it concerns; `sync` names `submissions`.
    """

    id: str
    action: str
    jobs: list[int]
    reply_to: str  # the Redis list the confirmation is pushed to
    submissions: list[int] = []
    priority: int | None = None
    instance_type: str | None = None


class Confirmation(msgspec.Struct, forbid_unknown_fields=True):
    """Cluster -> gateway: the jobs of the command it acted on (the others it did not have, or could not)."""

    command: Annotated[str, msgspec.Meta(max_length=100)]
    cluster_id: int
    jobs: Annotated[list[int], msgspec.Meta(max_length=100_000)]


class ActionResult(msgspec.Struct):
    message: str  # the toast, word for word
    acted: int
    unconfirmed: list[str]  # clusters that did not confirm in time


def unconfirmed_suffix(names: list[str]) -> str:
    if not names:
        return ""
    if len(names) == 1:
        return f"; cluster {names[0]} did not confirm"
    return f"; clusters {', '.join(names)} did not confirm"


def toast(action: Action, found: int, acted: int, unconfirmed: list[str]) -> ActionResult:
    """What the person is told: found is how many jobs qualified, acted how many changed."""
    names = sorted(unconfirmed)
    if action == "remove":
        message = "No queued or running jobs found" if not found else f"Removed {acted} job(s){unconfirmed_suffix(names)}"
    else:
        message = "No failed jobs found to retry" if not found else f"Queued {acted} failed job(s) for retry{unconfirmed_suffix(names)}"
    return ActionResult(message=message, acted=acted, unconfirmed=names)


command_encoder = msgspec.json.Encoder()
command_decoder = msgspec.json.Decoder(Command)
confirmation_decoder = msgspec.json.Decoder(Confirmation)


# -- the Submissions page's actions, on submissions or on tasks

class TaskAction(msgspec.Struct, frozen=True):
    """Which tasks an action takes, what they become once their cluster confirms, and what the toast says."""

    name: str
    takes: tuple[str, ...]  # task statuses it applies to
    becomes: str  # the status a confirmed task gets
    verb: str  # the toast: f"{verb} {n} task(s)"
    new_attempt: bool = False  # a retry starts the next attempt


TASK_ACTIONS: dict[str, TaskAction] = {
    a.name: a
    for a in (
        TaskAction(name="hold", takes=("queued", "retrying"), becomes="holding", verb="Held"),
        TaskAction(name="unhold", takes=("holding",), becomes="queued", verb="Released"),
        TaskAction(name="kill", takes=("queued", "retrying", "running", "holding"), becomes="failed", verb="Killed"),
        TaskAction(name="retry", takes=("completed", "failed", "preempted", "queued", "retrying", "running", "holding"),
                   becomes="retrying", verb="Queued for retry", new_attempt=True),
        TaskAction(name="retry_failed", takes=("failed",), becomes="retrying", verb="Queued failed for retry", new_attempt=True),
        TaskAction(name="retry_preempted", takes=("preempted",), becomes="retrying", verb="Queued preempted for retry",
                   new_attempt=True),
    )
}
KILLED = "Killed by a user"  # the error a killed task shows


class SubmissionsAction(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /api/submissions/actions`: one action on selected submissions, or on selected tasks."""

    action: Literal["hold", "unhold", "kill", "retry", "retry_failed", "retry_preempted", "retry_sync", "reviewed",
                    "priority", "instance_type"]
    submissions: Annotated[list[Id], msgspec.Meta(max_length=1000)] = []
    tasks: Annotated[list[Id], msgspec.Meta(max_length=100_000)] = []
    priority: Annotated[int, msgspec.Meta(ge=-1000, le=1000)] | None = None
    instance_type: Annotated[Text, msgspec.Meta(min_length=1, max_length=64)] | None = None
    cores: Annotated[int, msgspec.Meta(ge=1, le=1024)] | None = None
    memory_gb: Annotated[int, msgspec.Meta(ge=1, le=16384)] | None = None


def task_toast(action: TaskAction, found: int, acted: int, unconfirmed: list[str]) -> ActionResult:
    names = sorted(unconfirmed)
    if not found:
        return ActionResult(message=f"No tasks to {action.name.replace('_', ' ')}", acted=0, unconfirmed=names)
    verb = action.verb
    if verb.startswith("Queued"):
        kind = verb.removeprefix("Queued").removesuffix("for retry").strip()
        message = f"Queued {acted} {kind + ' ' if kind else ''}task(s) for retry{unconfirmed_suffix(names)}"
    else:
        message = f"{verb} {acted} task(s){unconfirmed_suffix(names)}"
    return ActionResult(message=message, acted=acted, unconfirmed=names)
