"""Acting on jobs through the clusters: the messages exchanged, and the toast a person reads.

An action (Remove Running Jobs, Retry Failed Jobs) becomes one command per cluster that holds the jobs; each
cluster answers with the jobs it acted on. Only confirmed jobs change, and the toast names any cluster that
did not confirm in time.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

Action = Literal["remove", "retry"]
REMOVABLE = ("queued", "retrying", "running", "holding")  # Remove Running Jobs takes holding ones too
RETRYABLE = ("failed",)  # not preempted ones: Retry Preempted does those


class Command(msgspec.Struct, tag_field="type", tag="command"):
    """Gateway -> cluster, on the cluster's command channel."""

    id: str
    action: Action
    jobs: list[int]
    reply_to: str  # the Redis list the confirmation is pushed to


class Confirmation(msgspec.Struct, forbid_unknown_fields=True):
    """Cluster -> gateway: the jobs of the command it acted on (the others it did not have, or could not)."""

    command: Annotated[str, msgspec.Meta(max_length=100)]
    cluster_id: int
    jobs: Annotated[list[int], msgspec.Meta(max_length=100_000)]


class ActionResult(msgspec.Struct):
    message: str  # the toast, word for word
    acted: int
    unconfirmed: list[str]  # clusters that did not confirm in time


def _silent(names: list[str]) -> str:
    if not names:
        return ""
    if len(names) == 1:
        return f"; cluster {names[0]} did not confirm"
    return f"; clusters {', '.join(names)} did not confirm"


def toast(action: Action, found: int, acted: int, unconfirmed: list[str]) -> ActionResult:
    """What the person is told: found is how many jobs qualified, acted how many changed."""
    names = sorted(unconfirmed)
    if action == "remove":
        message = "No queued or running jobs found" if not found else f"Removed {acted} job(s){_silent(names)}"
    else:
        message = "No failed jobs found to retry" if not found else f"Queued {acted} failed job(s) for retry{_silent(names)}"
    return ActionResult(message=message, acted=acted, unconfirmed=names)


command_encoder = msgspec.json.Encoder()
command_decoder = msgspec.json.Decoder(Command)
confirmation_decoder = msgspec.json.Decoder(Confirmation)
