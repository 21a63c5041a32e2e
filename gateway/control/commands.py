"""Send an action's commands to the clusters, wait for their confirmations, apply what they did.

A command is kept in PostgreSQL first (gateway.store.commands: until confirmed or expired), then sent on the bus
to the node that holds the cluster's feed (`cluster:<id>`, gateway.hub.cluster_feeds), which writes it to the
cluster's websocket; a cluster that is away finds it in its feed's snapshot when it connects again. The cluster
confirms over HTTP (`POST /api/ingest/confirmations`); the node that takes it records it and pushes it onto the
command's reply list (gateway.bus.commands: read by one listener per process, so a waiting command holds no
pooled connection). A cluster whose feed no node holds is known at once (the bus's PUBLISH reaches nobody); the
others get one shared time budget, and at its end the confirmations recorded in PostgreSQL count too (one whose
bus message was lost). Only confirmed jobs change in PostgreSQL (gateway.store.tasks), through the captured path,
so everyone watching sees the result live. Nothing of the bus is ever handed to a cluster.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass

import msgspec

from ..bus.broker import Commands
from ..core.control import (
    REMOVABLE,
    RETRYABLE,
    WATCHED,
    Action,
    ActionPreview,
    ActionResult,
    Asked,
    ClusterShare,
    Pending,
    confirmed_decoder,
    toast,
)
from ..core.protocol import json_encoder
from ..store import activity, clusters, tasks
from ..store import commands as kept
from ..store.tasks import HeldJob, Scope
from ..store.types import Pool

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Dispatch:
    """What sending commands takes: PostgreSQL (where they are kept), the bus (to the node holding a cluster's
    feed, and its confirmations back), how long a person waits (GATEWAY_COMMAND_TIMEOUT) and how long a command
    is kept for a cluster that is away (GATEWAY_COMMAND_EXPIRY)."""

    pool: Pool
    commands: Commands
    timeout: float
    keep: float


async def preview_removal(pool: Pool, team_id: int, trajectory_id: int, action: Action = "remove") -> ActionPreview:
    """What Remove Running Jobs (or Retry Failed Jobs: `retry`) would take of a trajectory, per cluster; nothing
    is done."""
    statuses = list(REMOVABLE if action == "remove" else RETRYABLE)
    rows = await tasks.jobs_in_scope(pool, "trajectory", trajectory_id, team_id, statuses)
    return ActionPreview(action=action, tasks=len(rows), submissions=0, clusters=await shares_of(pool, rows))


async def shares_of(pool: Pool, jobs: list[HeldJob]) -> list[ClusterShare]:
    """`cluster_shares`, each silent cluster said to be, and for how long."""
    silent = await clusters.silent_among(pool, sorted({j.cluster_id for j in jobs}))
    return cluster_shares(jobs, {j.cluster: silent[j.cluster_id] for j in jobs if j.cluster_id in silent})


async def run_action(
    dispatch: Dispatch, action: Action, team_id: int, scope: Scope, scope_id: int, by: int | None = None
) -> ActionResult:
    """Act on team `team_id`'s jobs in `scope` (a trajectory's, an analysis's ...: gateway.store.tasks), through
    their clusters.

    Remove Running Jobs sends the clusters `remove`. Retry Failed Jobs takes what the Jobs view counts as Failed:
    the clusters get `retry_failed` for the failed jobs and `retry_preempted` for the preempted ones (their
    `retry` restarts every task: the Submissions page's Retry). Recorded in the team's activity as done by `by`.
    """
    pool = dispatch.pool
    statuses = list(REMOVABLE if action == "remove" else RETRYABLE)
    rows = await tasks.jobs_in_scope(pool, scope, scope_id, team_id, statuses)
    name = "remove_running" if action == "remove" else "retry_failed"
    await activity.record(pool, team_id, by, name, len(rows), [r.cluster for r in rows], f"{scope}:{scope_id}")
    if not rows:
        return toast(action, 0, 0)
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
        *(ask_clusters(dispatch, command, by_cluster) for (command, _), (by_cluster, _) in zip(parts, asked))
    )
    confirmed: dict[int, set[int]] = {}
    waiting: set[int] = set()  # jobs whose cluster did not confirm (for this job's command)
    for (by_cluster, _), answer in zip(asked, answers):
        for cluster_id, ids in answer.items():
            confirmed.setdefault(cluster_id, set()).update(ids)
        waiting.update(i for c, ids in by_cluster.items() if c not in answer for i in ids)
    acted = await _apply(pool, action, confirmed, statuses, {r.id: r.attempts for r in rows}, by)
    preempted = {r.id for r in rows if r.status == "preempted"}
    acted_preempted = sum(1 for ids in confirmed.values() for i in ids if i in preempted)
    pending = await pending_parts(pool, [r for r in rows if r.id in waiting])
    return toast(action, len(rows), acted, preempted=acted_preempted, pending=pending, preempted_found=len(preempted))


async def pending_parts(pool: Pool, jobs: list[HeldJob]) -> list[Pending]:
    """The jobs of clusters that did not confirm, per cluster: each part with its count, the jobs themselves (for
    the browser to follow: up to WATCHED in all, each cluster its share, the rest counted) and how long the
    cluster has been silent, if it is."""
    by_cluster: dict[int, list[HeldJob]] = {}
    for job in jobs:
        by_cluster.setdefault(job.cluster_id, []).append(job)
    silent = await clusters.silent_among(pool, sorted(by_cluster))
    parts = sorted(by_cluster.items(), key=lambda kv: kv[1][0].cluster)
    return [
        Pending(
            cluster=part[0].cluster,
            count=len(part),
            jobs=[Asked(j.id, j.trajectory_id, j.attempts) for j in sorted(part)[: share(len(part), len(jobs))]],
            silent_seconds=silent.get(cluster_id),
        )
        for cluster_id, part in parts
    ]


def share(part: int, whole: int, watched: int = WATCHED) -> int:
    """How many of a cluster's `part` of `whole` jobs an answer names: all of them when the whole is within
    `watched`, else its share of `watched` (so the named stay within it, whatever the clusters)."""
    return part if whole <= watched else part * watched // whole


async def silence(pool: Pool, unconfirmed: dict[int, str]) -> dict[str, float]:
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


def cluster_shares(jobs: list[HeldJob], silent: dict[str, float] | None = None) -> list[ClusterShare]:
    """How many of the jobs each cluster holds, by name: what a confirmation names before anything is done;
    `silent`: the silent ones among them, by name, and for how many seconds."""
    shares: dict[str, int] = {}
    for job in jobs:
        shares[job.cluster] = shares.get(job.cluster, 0) + 1
    quiet = silent or {}
    return [ClusterShare(name, n, quiet.get(name)) for name, n in sorted(shares.items())]


async def ask_clusters(
    dispatch: Dispatch,
    action: str,
    by_cluster: dict[int, list[int]],
    priority: int | None = None,
    instance_type: str | None = None,
) -> dict[int, set[int]]:
    """Send each cluster its command; the ids each one confirmed, for those that answered in time."""
    command_id = uuid.uuid4().hex
    commands = dispatch.commands
    confirmed: dict[int, set[int]] = {}
    async with commands.replies(command_id) as replies:
        waiting: set[int] = set()
        for cluster_id, job_ids in by_cluster.items():
            command = await kept.record(
                dispatch.pool,
                command_id,
                cluster_id,
                action,
                job_ids,
                replies.key,
                dispatch.keep,
                priority,
                instance_type,
            )
            if await commands.send(cluster_id, json_encoder.encode(command)):
                waiting.add(cluster_id)
        deadline = time.monotonic() + dispatch.timeout
        while waiting:
            reply = await replies.next(deadline)
            if reply is None:
                break
            try:
                answer = confirmed_decoder.decode(reply)
            except msgspec.DecodeError:  # the gateway's own message: a bug, said once and skipped
                log.warning("ignored an undecodable confirmation for %s", command_id)
                continue
            if answer.cluster_id in waiting:
                waiting.discard(answer.cluster_id)
                confirmed[answer.cluster_id] = set(answer.jobs)  # checked against the command when recorded
    if waiting:  # recorded, but its word on the bus was lost (a failover) or came just too late
        late = await kept.confirmations(dispatch.pool, command_id, sorted(waiting))
        confirmed.update((c, set(jobs)) for c, jobs in late.items())
    return confirmed


async def _apply(
    pool: Pool,
    action: Action,
    confirmed: dict[int, set[int]],
    statuses: list[str],
    seen: dict[int, int],
    by: int | None,
) -> int:
    ids = sorted(i for jobs in confirmed.values() for i in jobs)
    if not ids:
        return 0
    if action == "remove":
        await tasks.tombstone(pool, ids, statuses, by)
    else:
        await tasks.retry(pool, {i: seen[i] for i in ids}, statuses, by)
    return len(ids)  # what the clusters did, whichever write reached the row first
