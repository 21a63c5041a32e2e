"""Send an action's commands to the clusters over Redis, wait for their confirmations, apply what they did.

Each cluster listens on its command channel (`gw:cluster:<id>`, pub/sub) and pushes its confirmation onto the
command's reply list (gateway.bus.commands: read by one listener per process, so a waiting command holds no
pooled connection). A cluster with no listener is known at once (PUBLISH reaches nobody); the others get one
shared time budget. Only confirmed jobs change in PostgreSQL (gateway.store.tasks), through the captured
path, so everyone watching sees the result live.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

import asyncpg
import msgspec

from ..bus.broker import Commands
from ..core.control import (
    REMOVABLE,
    RETRYABLE,
    Action,
    ActionPreview,
    ActionResult,
    ClusterShare,
    Command,
    command_encoder,
    confirmation_decoder,
    toast,
)
from ..store import clusters, tasks
from ..store.tasks import HeldJob, Scope

log = logging.getLogger(__name__)


async def preview_removal(pool: asyncpg.Pool, team_id: int, trajectory_id: int) -> ActionPreview:
    """What Remove Running Jobs would take of a trajectory, per cluster; nothing is done."""
    rows = await tasks.jobs_in_scope(pool, "trajectory", trajectory_id, team_id, list(REMOVABLE))
    return ActionPreview(action="remove", tasks=len(rows), submissions=0, clusters=cluster_shares(rows))


async def run_action(
    pool: asyncpg.Pool,
    commands: Commands,
    action: Action,
    team_id: int,
    scope: Scope,
    scope_id: int,
    timeout: float,
) -> ActionResult:
    """Act on team `team_id`'s jobs in `scope` (a trajectory's, an analysis's ...: gateway.store.tasks), through
    their clusters.

    Remove Running Jobs sends the clusters `remove`. Retry Failed Jobs takes what the Jobs view counts as Failed:
    the clusters get `retry_failed` for the failed jobs and `retry_preempted` for the preempted ones (their
    `retry` restarts every task: the Submissions page's Retry).
    """
    statuses = list(REMOVABLE if action == "remove" else RETRYABLE)
    rows = await tasks.jobs_in_scope(pool, scope, scope_id, team_id, statuses)
    if not rows:
        return toast(action, 0, 0, [])
    if action == "remove":
        parts = [("remove", rows)]
    else:
        parts = [
            (command, [r for r in rows if r.status == status])
            for command, status in (("retry_failed", "failed"), ("retry_preempted", "preempted"))
        ]
        parts = [(command, part) for command, part in parts if part]
    asked = [holders(part) for _, part in parts]
    answers = await asyncio.gather(
        *(ask_clusters(commands, command, by_cluster, timeout) for (command, _), (by_cluster, _) in zip(parts, asked))
    )
    confirmed: dict[int, set[int]] = {}
    unconfirmed: dict[int, str] = {}
    for (by_cluster, names), answer in zip(asked, answers):
        for cluster_id, ids in answer.items():
            confirmed.setdefault(cluster_id, set()).update(ids)
        unconfirmed.update((c, names[c]) for c in by_cluster if c not in answer)
    acted = await _apply(pool, action, confirmed, statuses, {r.id: r.attempts for r in rows})
    preempted = {r.id for r in rows if r.status == "preempted"}
    acted_preempted = sum(1 for ids in confirmed.values() for i in ids if i in preempted)
    silent = await silence(pool, unconfirmed)
    return toast(action, len(rows), acted, sorted(unconfirmed.values()), preempted=acted_preempted, silent=silent)


async def silence(pool: asyncpg.Pool, unconfirmed: dict[int, str]) -> dict[str, float]:
    """Which clusters that did not confirm are silent, by name, and for how many seconds."""
    seconds = await clusters.silent_among(pool, list(unconfirmed))
    return {unconfirmed[c]: s for c, s in seconds.items()}


def holders(jobs: list[HeldJob]) -> tuple[dict[int, list[int]], dict[int, str]]:
    """The jobs each cluster holds, and the clusters' names."""
    by_cluster: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for job in jobs:
        by_cluster.setdefault(job.cluster_id, []).append(job.id)
        names[job.cluster_id] = job.cluster
    return by_cluster, names


def cluster_shares(jobs: list[HeldJob]) -> list[ClusterShare]:
    """How many of the jobs each cluster holds, by name: what a confirmation names before anything is done."""
    shares: dict[str, int] = {}
    for job in jobs:
        shares[job.cluster] = shares.get(job.cluster, 0) + 1
    return [ClusterShare(name, n) for name, n in sorted(shares.items())]


async def ask_clusters(
    commands: Commands, action: str, by_cluster: dict[int, list[int]], timeout: float, **extra: object
) -> dict[int, set[int]]:
    """Send each cluster its command; the ids each one confirmed, for those that answered in time."""
    command_id = uuid.uuid4().hex
    confirmed: dict[int, set[int]] = {}
    async with commands.replies(command_id) as replies:
        waiting: set[int] = set()
        for cluster_id, job_ids in by_cluster.items():
            command = Command(id=command_id, action=action, jobs=job_ids, reply_to=replies.key, **extra)  # type: ignore[arg-type]
            if await commands.send(cluster_id, command_encoder.encode(command)):
                waiting.add(cluster_id)
        deadline = time.monotonic() + timeout
        while waiting:
            reply = await replies.next(deadline)
            if reply is None:
                break
            try:
                confirmation = confirmation_decoder.decode(reply)
            except msgspec.ValidationError as exc:
                log.warning("ignored a malformed confirmation for %s: %s", command_id, exc)
                continue
            except msgspec.DecodeError:
                log.warning("ignored an undecodable confirmation for %s", command_id)
                continue
            if confirmation.command != command_id or confirmation.cluster_id not in waiting:
                continue
            waiting.discard(confirmation.cluster_id)
            # A cluster can only confirm the jobs it was asked about.
            confirmed[confirmation.cluster_id] = set(confirmation.jobs) & set(by_cluster[confirmation.cluster_id])
    return confirmed


async def _apply(
    pool: asyncpg.Pool, action: Action, confirmed: dict[int, set[int]], statuses: list[str], seen: dict[int, int]
) -> int:
    ids = sorted(i for jobs in confirmed.values() for i in jobs)
    if not ids:
        return 0
    if action == "remove":
        await tasks.tombstone(pool, ids, statuses)
    else:
        await tasks.retry(pool, {i: seen[i] for i in ids}, statuses)
    return len(ids)  # what the clusters did, whichever write reached the row first
