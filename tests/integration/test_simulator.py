"""The cluster simulator behaves like a real cluster: three attempts, then failed for good; workloads."""

from __future__ import annotations

import asyncio

import asyncpg

from gateway.sim.cluster import SimCluster
from gateway.sim.workloads import pipeline, upload
from tests.conftest import Stack
from tests.follower import Follower
from tests.integration.conftest import Team


async def test_a_frame_job_gets_three_attempts_before_it_fails(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    cluster = SimCluster(stack.nodes[0].http, stack.redis_url, team.cluster_key, workers=1, fail_rate=1.0, speed=1.5, report_metrics=False)
    await cluster.start()
    channel = f"trajectory:{team.trajectory_id}"
    try:
        async with Follower(stack.nodes[1].ws, team.token) as f:
            await f.subscribe(channel)
            await f.wait_for(lambda f: f.channels[channel].snapshot_done)
            (job_id,) = await cluster.submit([{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "Preprocess trajectory frame", "frame": 0}])
            await f.wait_for(lambda f: f.listed(channel).get(job_id, {}).get("status") == "failed", timeout=15)
            seen = [(j["status"], j["attempts"]) for m in f.messages if m["type"] == "batch" for j in m["jobs"] if j["id"] == job_id]
        # Coalescing may fold some steps together, but the attempts only rise and end failed at the third.
        assert seen[-1] == ("failed", 3)
        assert [a for _, a in seen] == sorted(a for _, a in seen)
        assert ("retrying", 2) in seen or ("running", 2) in seen
        row = await pool.fetchrow("select status, attempts, error from jobs where id = $1", job_id)
        assert (row["status"], row["attempts"]) == ("failed", 3) and row["error"]
    finally:
        await cluster.stop()


async def test_an_upload_and_a_pipeline_run_end_with_their_notices(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    cluster = SimCluster(stack.nodes[0].http, stack.redis_url, team.cluster_key, workers=8, fail_rate=0.0, speed=20, report_metrics=False)
    await cluster.start()
    channel = f"trajectory:{team.trajectory_id}"
    try:
        async with Follower(stack.nodes[0].ws, team.token) as f:
            await f.subscribe(channel)
            await f.wait_for(lambda f: f.channels[channel].snapshot_done)
            await upload(cluster, team.trajectory_id, 12)
            await f.wait_for(lambda f: any(m["type"] == "notice" for m in f.messages), timeout=20)
            await pipeline(cluster, team.trajectory_id, 12, ["Polyhedral Template Matching", "Radial Distribution Function"])
            await f.wait_for(lambda f: sum(m["type"] == "notice" for m in f.messages) == 2, timeout=30)
            titles = [m["title"] for m in f.messages if m["type"] == "notice"]
            assert titles == ["Rasterization completed successfully", "Analysis completed successfully!"]
        kinds = dict(await pool.fetch("select kind, count(*) from jobs where trajectory_id = $1 group by kind", team.trajectory_id))
        assert kinds == {"preprocess": 12, "rasterize": 1, "analysis": 24, "artifact_upload": 2}
    finally:
        await cluster.stop()
