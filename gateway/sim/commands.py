"""A simulated cluster's side of the command channel: it listens, carries out Remove, Retry, Hold and the rest
on the jobs it holds, and confirms what it did (unless told never to confirm, as a broken cluster would not).

Whether or not its confirmation arrives, it reports each job it changed through ingest, as a real cluster's
daemon reports every state it sees: a reply lost on the way never leaves a job listed as it was."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

import msgspec

from ..core.control import KILLED, Confirmation, command_decoder

if TYPE_CHECKING:
    from .cluster import SimCluster, SimJob

log = logging.getLogger(__name__)

ACTIVE = ("queued", "retrying", "running", "holding")


async def listen(cluster: SimCluster, listening: asyncio.Event) -> None:
    """Carry out the commands sent to the cluster until cancelled; `listening` is set once they reach it."""
    commands = cluster.broker.commands
    async with commands.inbox(cluster.cluster_id) as inbox:
        listening.set()
        async for data in inbox:
            try:
                command = command_decoder.decode(data)
            except msgspec.DecodeError:
                log.warning("cluster %d: ignored a malformed command", cluster.cluster_id)
                continue
            acted = act(cluster, command.action, command.jobs, command.priority)
            if cluster.confirm:
                reply = Confirmation(command=command.id, cluster_id=cluster.cluster_id, jobs=acted)
                await commands.confirm(command.reply_to, msgspec.json.encode(reply))


def act(cluster: SimCluster, action: str, job_ids: list[int], priority: int | None = None) -> list[int]:
    """Carry out a command on the jobs this cluster holds; the ones acted on are confirmed."""
    if action == "sync":  # the ids are submissions: sync again the ones this cluster failed to sync
        acted = [i for i in job_ids if i in cluster.sync_failed]
        for submission_id in acted:
            cluster.sync_failed.pop(submission_id).set()
        return acted
    acted = []
    for job_id in job_ids:
        job = cluster.jobs.get(job_id)
        if job is None or job.removed:
            continue
        if _act_on(cluster, action, job, priority):
            acted.append(job_id)
            _report(cluster, action, job)
    return acted


def _report(cluster: SimCluster, action: str, job: SimJob) -> None:
    """The job's state after the action, as the cluster's next report batch carries it."""
    if action in ("priority", "instance_type"):
        return  # no state of the job changed
    report: dict[str, object] = {"id": job.id, "attempt": job.attempt, "status": job.status}
    if action == "remove":
        report["removed"] = True
    elif action == "kill":
        report["error"] = KILLED
    cluster.ingest.report(report)


def _act_on(cluster: SimCluster, action: str, job: SimJob, priority: int | None) -> bool:
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
