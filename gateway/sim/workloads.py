"""The work clusters do for a team: uploads, pipeline runs, transfers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from .cluster import SimCluster, SimJob

PLUGINS = [
    "Polyhedral Template Matching",
    "Radial Distribution Function",
    "Common Neighbor Analysis",
    "Dislocation Analysis",
    "Coordination Analysis",
]
TIMESTEP = 0.5  # ps between frames
PROJECTS = ["membranes", "folding", "ion channels", "materials"]


async def stage(cluster: SimCluster, submission_id: int, fail_rate: float | None = None, pace: float = 0.4) -> None:
    """The submission's data on its way: uploading, then synced to the cluster's fast storage (which can fail,
    `fail_rate` or the cluster's `sync_fail_rate` of the time, and then waits for Retry Sync or the operator)."""
    for state in ("uploading", "sync_pending", "syncing"):
        await asyncio.sleep(pace / cluster.speed)
        await cluster.update_submission(submission_id, staging=state)
    if cluster.rng.random() < (cluster.sync_fail_rate if fail_rate is None else fail_rate):
        await asyncio.sleep(pace / cluster.speed)
        await cluster.update_submission(submission_id, staging="sync_failed")
        await cluster.sync_retried(submission_id)
        await cluster.update_submission(
            submission_id, staging="syncing"
        )  # again (after Retry Sync the gateway shows it already)
        await asyncio.sleep(pace / cluster.speed)
    await cluster.update_submission(submission_id, staging="ready")


async def finish_staging(cluster: SimCluster, submission_id: int, state: str, pace: float = 0.4) -> None:
    """A submission a previous run left staging: a failed sync waits for its retry as any would, the rest syncs."""
    if state == "sync_failed":
        await cluster.sync_retried(submission_id)
    await asyncio.sleep(pace / cluster.speed)
    await cluster.update_submission(submission_id, staging="syncing")
    await asyncio.sleep(pace / cluster.speed)
    await cluster.update_submission(submission_id, staging="ready")


def download_when_done(cluster: SimCluster, submission_id: int, tasks: int) -> Callable[[SimJob], None]:
    """The download tool: once every task of the submission completed, fetch the results and say so."""
    left = {"n": tasks, "failed": False}

    def done(job: SimJob) -> None:
        left["n"] -= 1
        left["failed"] = left["failed"] or job.status != "completed"
        if left["n"] == 0 and not left["failed"]:
            cluster.spawn(download(), f"the download of submission {submission_id}")

    async def download() -> None:
        await cluster.flushed()  # the gateway has seen every task succeed before the results are fetched
        await asyncio.sleep(0.2 / cluster.speed)
        await cluster.update_submission(submission_id, downloaded=True)

    return done


def instance_type(cluster: SimCluster, preemptible: bool) -> dict[str, Any]:
    """One of the cluster's instance types: a preemptible (spot) one, or not."""
    fitting = [t for t in cluster.instance_types if bool(t.get("preemptible")) == preemptible]
    return cluster.rng.choice(fitting) if fitting else {"name": "standard", "cores": 4, "memory_gb": 16}


def as_submitted(kind: dict[str, Any]) -> dict[str, Any]:
    """A submission's fields for an instance type: its name, cores, memory, and PREEMPTIBLE from the type."""
    return {
        "instance_type": kind["name"],
        "cores": kind["cores"],
        "memory_gb": kind["memory_gb"],
        "preemptible": bool(kind.get("preemptible")),
    }


async def upload(
    cluster: SimCluster, trajectory_id: int, frames: int, staged: bool = False, user_id: int | None = None
) -> None:
    """An uploaded trajectory: one preprocess job per frame, then the preview's rasterize job. `user_id`: the team
    member who uploaded it (the Submissions page's USER)."""
    submission_id = None
    if staged:
        submission_id = await cluster.create_submission(
            title=f"Upload of {frames} frames",
            project="uploads",
            trajectory_id=trajectory_id,
            staging="upload_pending",
            **({"user_id": user_id} if user_id is not None else {}),
            **as_submitted(instance_type(cluster, False)),
        )
        await stage(cluster, submission_id)
    reports: list[dict[str, Any]] = [
        {
            "trajectory_id": trajectory_id,
            "kind": "preprocess",
            "name": "Preprocess trajectory frame",
            "frame": f,
            "timestep": f * TIMESTEP,
        }
        for f in range(frames)
    ]
    reports.append({"trajectory_id": trajectory_id, "kind": "rasterize", "name": "Rasterize trajectory preview"})
    if submission_id is not None:
        for r in reports:
            r["submission_id"] = submission_id
        await cluster.submit(reports, on_done=download_when_done(cluster, submission_id, len(reports)))
    else:
        await cluster.submit(reports)


async def pipeline(
    cluster: SimCluster,
    trajectory_id: int,
    frames: int,
    plugins: list[str],
    preemptible: bool = False,
    user_id: int | None = None,
    project: str | None = None,
) -> None:
    """A pipeline run, submitted by a team member (`user_id`) as one submission on one of the cluster's instance
    types: one job per analysis under each frame; each analysis uploads its artifacts when done. On a
    preemptible instance type some runs lose their node (preempted) now and then."""
    submission_id = None
    if user_id is not None:
        submission_id = await cluster.create_submission(
            title=f"Pipeline run: {', '.join(plugins)}",
            project=project or cluster.rng.choice(PROJECTS),
            trajectory_id=trajectory_id,
            user_id=user_id,
            **as_submitted(instance_type(cluster, preemptible)),
        )
    tag = {} if submission_id is None else {"submission_id": submission_id}
    for plugin in plugins:
        analysis_id = await cluster.create_analysis(trajectory_id, plugin)
        left = {"n": frames}

        def done(job: SimJob, analysis_id: int = analysis_id, left: dict[str, int] = left) -> None:
            left["n"] -= 1
            if left["n"] == 0:
                artifacts = {
                    "trajectory_id": trajectory_id,
                    "kind": "artifact_upload",
                    "name": "Artifact Upload",
                    "analysis_id": analysis_id,
                    **tag,
                }
                cluster.spawn(_submitted(cluster, [artifacts]), f"the artifact upload of analysis {analysis_id}")

        await cluster.submit(
            [
                {
                    "trajectory_id": trajectory_id,
                    "kind": "analysis",
                    "name": plugin,
                    "analysis_id": analysis_id,
                    "frame": f,
                    "timestep": f * TIMESTEP,
                    **tag,
                }
                for f in range(frames)
            ],
            on_done=done,
            preemptible=preemptible,
        )


async def transfer(cluster: SimCluster, trajectory_id: int, kind: str = "storage_transfer") -> None:
    name = {"trajectory_transfer": "Trajectory Transfer", "analysis_transfer": "Analysis Transfer"}.get(
        kind, "Storage Transfer"
    )
    await cluster.submit([{"trajectory_id": trajectory_id, "kind": kind, "name": name}])


async def _submitted(cluster: SimCluster, reports: list[dict[str, Any]]) -> None:
    await cluster.submit(reports)
