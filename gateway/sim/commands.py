"""A simulated cluster's side of its command feed: it opens the gateway's websocket with its key, follows its own
channel (`cluster:<id>`), carries out Remove, Retry, Hold and the rest on the jobs it holds, and confirms what it
did over HTTP (unless told never to confirm, as a broken cluster would not). It needs nothing but the gateway's
URL and its key.

A command id is acted on once: the feed's snapshot lists every command not yet confirmed, so one may arrive
again (a reconnect, a confirmation lost on the way); its confirmation is then sent again, which changes nothing.
Whether or not its confirmation arrives, it reports each job it changed through ingest, as a real cluster's
daemon reports every state it sees: a reply lost on the way never leaves a job listed as it was."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

import httpx

from ..client import GatewayClient
from ..core.channels import cluster as cluster_channel
from ..core.control import KILLED
from ..core.protocol import Command, Snapshot
from .ingest import IngestClient, describe_failure
from .jobs import SimJob

log = logging.getLogger(__name__)

ACTIVE = ("queued", "retrying", "running", "holding")
RETRIES = ("retry", "retry_failed", "retry_preempted")
CONFIRM_ATTEMPTS = 3  # a confirmation cut off on the way is sent again at once, this many times in all
REMEMBERED = 10_000  # command ids a cluster remembers having acted on (the oldest are forgotten first)


class Cluster(Protocol):
    """What carrying out commands needs of a simulated cluster (gateway.sim.cluster.SimCluster is one)."""

    gateway_url: str
    key: str
    cluster_id: int
    confirm: bool
    ingest: IngestClient
    jobs: dict[int, SimJob]
    carried_out: dict[str, list[int]]  # command id -> the jobs it changed, oldest first
    sync_failed: dict[int, asyncio.Event]  # submissions whose sync failed, waiting for a retry

    def job(self, job_id: int) -> SimJob | None: ...

    def enqueue(self, job: SimJob) -> None: ...

    def finish(self, job: SimJob) -> None: ...


async def listen(cluster: Cluster, listening: asyncio.Event) -> None:
    """Carry out the commands sent to the cluster until cancelled; `listening` is set once its feed's first
    snapshot has arrived (every command sent from then on reaches it)."""
    async with GatewayClient(cluster.gateway_url, cluster.key, max_backoff=2.0) as feed:
        await feed.subscribe(cluster_channel(cluster.cluster_id))
        async for message in feed:
            if isinstance(message, Snapshot):
                for command in message.commands or []:
                    await _carry_out(cluster, command)
                if message.final:
                    listening.set()
            elif isinstance(message, Command):
                await _carry_out(cluster, message)


async def _carry_out(cluster: Cluster, command: Command) -> None:
    """Act on a command once, and confirm it (again, if it came again: the first confirmation may be lost)."""
    acted = cluster.carried_out
    done = acted.get(command.id)
    if done is None:
        done = acted[command.id] = act(cluster, command.action, command.jobs, command.priority)
        while len(acted) > REMEMBERED:
            del acted[next(iter(acted))]  # the oldest
    if not cluster.confirm:
        return
    body = {"command": command.id, "jobs": done}
    for attempt in range(1, CONFIRM_ATTEMPTS + 1):
        try:
            response = await cluster.ingest.post("/api/ingest/confirmations", body)
            response.raise_for_status()
            return
        except httpx.HTTPError as exc:
            # Cut off on the way (a kept-alive connection the gateway closed as it was used): sent again at once,
            # as a repeated confirmation changes nothing. Refused, or failing still: the command stays in the
            # feed, confirmed when it comes again.
            if isinstance(exc, httpx.TransportError) and attempt < CONFIRM_ATTEMPTS:
                continue
            log.warning(
                "cluster %d: confirmation of %s failed: %s", cluster.cluster_id, command.id, describe_failure(exc)
            )
            return


def act(cluster: Cluster, action: str, job_ids: list[int], priority: int | None = None) -> list[int]:
    """Carry out a command on the jobs this cluster holds; the ones acted on are confirmed."""
    if action == "sync":  # the ids are submissions: sync again the ones this cluster failed to sync
        acted = [i for i in job_ids if i in cluster.sync_failed]
        for submission_id in acted:
            cluster.sync_failed.pop(submission_id).set()
        return acted
    acted = []
    for job_id in job_ids:
        # A retry may name a job finished long ago, no longer held whole: it is brought back to run again.
        job = cluster.job(job_id) if action in RETRIES else cluster.jobs.get(job_id)
        if job is None or job.removed:
            continue
        if _act_on(cluster, action, job, priority):
            acted.append(job_id)
            _report(cluster, action, job)
        elif action in RETRIES and job.status in ("completed", "failed", "preempted"):
            cluster.finish(job)  # brought back for nothing: held whole a while, then kept in two bytes again
    return acted


def _report(cluster: Cluster, action: str, job: SimJob) -> None:
    """The job's state after the action, as the cluster's next report batch carries it."""
    if action in ("priority", "instance_type"):
        return  # no state of the job changed
    report: dict[str, object] = {"id": job.id, "attempt": job.attempt, "status": job.status}
    if action == "remove":
        report["removed"] = True
    elif action == "kill":
        report["error"] = KILLED
    cluster.ingest.report(report)


def _act_on(cluster: Cluster, action: str, job: SimJob, priority: int | None) -> bool:
    if action == "remove" and job.status in ACTIVE:
        job.removed = True  # a running one stops; what it produced stays
        cluster.finish(job)
    elif action == "hold" and job.status in ("queued", "retrying"):
        job.status = "holding"  # workers leave it alone
    elif action == "unhold" and job.status == "holding":
        job.status = "queued"
        cluster.enqueue(job)
    elif action == "kill" and job.status in ACTIVE:
        job.status, job.run = "failed", job.run + 1
        cluster.finish(job)
    elif (
        action == "retry"
        or (action == "retry_failed" and job.status == "failed")
        or (action == "retry_preempted" and job.status == "preempted")
    ):
        if action == "retry" and job.status not in (*ACTIVE, "completed", "failed", "preempted"):
            return False
        job.status, job.attempt, job.run = "retrying", job.attempt + 1, job.run + 1
        cluster.enqueue(job)
    elif action == "priority" and priority is not None and job.status in ("queued", "retrying", "holding"):
        job.priority = priority
        if job.status != "holding":
            cluster.enqueue(job)  # its newer entry counts; the old one is skipped
    elif action == "instance_type" and job.status in ("queued", "retrying", "holding"):
        pass  # its next run uses the new node type
    else:
        return False
    return True
