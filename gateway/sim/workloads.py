"""The work clusters do for a team: uploads, pipeline runs, transfers."""

from __future__ import annotations

import asyncio
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


async def upload(cluster: SimCluster, trajectory_id: int, frames: int) -> None:
    """An uploaded trajectory: one preprocess job per frame, then the preview's rasterize job."""
    reports: list[dict[str, Any]] = [
        {"trajectory_id": trajectory_id, "kind": "preprocess", "name": "Preprocess trajectory frame", "frame": f, "timestep": f * TIMESTEP}
        for f in range(frames)
    ]
    reports.append({"trajectory_id": trajectory_id, "kind": "rasterize", "name": "Rasterize trajectory preview"})
    await cluster.submit(reports)


async def pipeline(cluster: SimCluster, trajectory_id: int, frames: int, plugins: list[str]) -> None:
    """A pipeline run: one job per analysis under each frame; each analysis uploads its artifacts when done."""
    for plugin in plugins:
        analysis_id = await cluster.create_analysis(trajectory_id, plugin)
        left = {"n": frames}

        def done(job: SimJob, analysis_id: int = analysis_id, left: dict[str, int] = left) -> None:
            left["n"] -= 1
            if left["n"] == 0:
                asyncio.get_running_loop().create_task(
                    cluster.submit([{"trajectory_id": trajectory_id, "kind": "artifact_upload", "name": "Artifact Upload", "analysis_id": analysis_id}])
                )

        await cluster.submit(
            [
                {"trajectory_id": trajectory_id, "kind": "analysis", "name": plugin, "analysis_id": analysis_id, "frame": f, "timestep": f * TIMESTEP}
                for f in range(frames)
            ],
            on_done=done,
        )


async def transfer(cluster: SimCluster, trajectory_id: int, kind: str = "storage_transfer") -> None:
    name = {"trajectory_transfer": "Trajectory Transfer", "analysis_transfer": "Analysis Transfer"}.get(kind, "Storage Transfer")
    await cluster.submit([{"trajectory_id": trajectory_id, "kind": kind, "name": name}])
