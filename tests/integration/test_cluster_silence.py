"""Nothing stays active for ever: a cluster that stops reporting has its unfinished jobs listed as silent (counted
apart from Running and Queued), an action on them says so, and they come back to their statuses when it reports
again. A world of its own: a relay that judges a cluster silent after a few seconds."""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.embedded import EmbeddedValkey, free_port
from gateway.sim.cluster import SimCluster
from harness.follower import Follower
from harness.world import World, spawn, wait_http
from tests.conftest import create_database, drop_database
from tests.integration.conftest import Team, make_team
from tests.integration.test_actions import add_cluster

SILENT_AFTER = 3  # seconds


@pytest.fixture(scope="module")
def quiet_world(pg_admin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    database_url = create_database(pg_admin)
    valkey = EmbeddedValkey(tmp_path_factory.mktemp("valkey-silence"))
    valkey.start()
    logdir = tmp_path_factory.mktemp("silence-logs")
    secret = secrets.token_urlsafe(32)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": f"redis://127.0.0.1:{valkey.port}/0",
        "GATEWAY_SECRET": secret,
        "GATEWAY_CLUSTER_SILENT_AFTER": str(SILENT_AFTER),
        "GATEWAY_LOG_LEVEL": "INFO",
    }
    port = free_port()
    node = spawn("qnode", ["serve", "--port", str(port)], env, logdir, port)
    world = World(database_url, valkey, secret, env, logdir, [node])
    world.start_relay("qrelay")
    try:
        wait_http(node)
        yield world
    finally:
        world.stop_relays()
        node.stop()
        valkey.stop()
        drop_database(pg_admin, database_url)


@pytest.fixture
async def qpool(quiet_world: World) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(quiet_world.database_url, min_size=1, max_size=4)
    yield pool
    await pool.close()


def cluster_of(world: World, team: Team, **options: Any) -> SimCluster:
    """The team's cluster with no workers: its jobs stay as the test puts them."""
    return SimCluster(world.nodes[0].http, team.cluster_key, workers=0, **options)


async def put(cluster: SimCluster, team: Team, statuses: list[str]) -> list[int]:
    ids = await cluster.submit(
        [
            {"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "Preprocess frame", "frame": i}
            for i in range(len(statuses))
        ]
    )
    for job_id, status in zip(ids, statuses):
        if status != "queued":
            cluster.jobs[job_id].status = status
            cluster._report(cluster.jobs[job_id])
    await cluster.flushed()
    return ids


async def act(world: World, team: Team, path: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=world.nodes[0].http) as client:
        response = await client.post(path, headers={"Authorization": f"Bearer {team.token}"})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


async def test_a_cluster_that_stops_reporting_has_its_jobs_listed_silent_until_it_reports_again(
    quiet_world: World, qpool: asyncpg.Pool
) -> None:
    team = await make_team(qpool, quiet_world.secret)
    cluster = cluster_of(quiet_world, team, report_metrics=False)
    await cluster.start()
    ids = await put(cluster, team, ["running", "running", "queued", "completed", "holding"])
    feed, panel = f"team:{team.id}", f"trajectory:{team.trajectory_id}"
    async with Follower(quiet_world.nodes[0].ws, team.token) as f:
        await f.subscribe(feed)
        await f.subscribe(panel)
        await f.wait_for(lambda f: (f.channels[feed].counts or {}).get("running") == 2)
        await cluster.stop()  # its process is gone: no report, no metrics

        def silent(f: Follower) -> bool:
            counts = f.channels[feed].counts or {}
            return (counts.get("silent"), counts.get("running"), counts.get("queued")) == (3, 0, 0)

        await f.wait_for(silent, timeout=60)
        counts = f.channels[feed].counts
        assert counts is not None and (counts["completed"], counts["holding"]) == (1, 1)  # those are known
        # Its held job waits for a person, not for the cluster: the trajectory reads queued, never running.
        await f.wait_for(lambda f: f.channels[feed].summaries[team.trajectory_id]["status"] == "queued", timeout=30)
        await f.wait_for(lambda f: all(f.listed(panel)[i]["silent_since"] for i in ids[:3]), timeout=30)
        jobs = f.listed(panel)
        assert [jobs[i]["status"] for i in ids[:3]] == ["running", "running", "queued"]  # stored statuses kept
        assert jobs[ids[3]]["silent_since"] is None and jobs[ids[4]]["silent_since"] is None

        # An action on them says which cluster is silent.
        result = await act(quiet_world, team, f"/api/trajectories/{team.trajectory_id}/remove-running")
        assert result["acted"] == 0 and result["unconfirmed"] == ["gpu-1"], result
        assert "cluster gpu-1 is silent (nothing heard for" in result["message"], result
        async with httpx.AsyncClient(base_url=quiet_world.nodes[0].http) as client:
            killed = await client.post(
                "/api/submissions/actions",
                json={"action": "kill", "tasks": ids[:3]},
                headers={"Authorization": f"Bearer {team.token}"},
            )
        assert killed.json()["message"].startswith(
            "Killing 3 task(s) on gpu-1: not confirmed yet; cluster gpu-1 is silent"
        ), killed.text

        # It reports again (a restarted daemon): every job shows its own status again.
        back = cluster_of(quiet_world, team, report_metrics=False)
        await back.start()
        try:
            await f.wait_for(
                lambda f: (
                    (f.channels[feed].counts or {}).get("running") == 2
                    and (f.channels[feed].counts or {}).get("silent") == 0
                ),
                timeout=30,
            )
            await f.wait_for(lambda f: not any(j["silent_since"] for j in f.listed(panel).values()), timeout=30)
            assert f.channels[feed].summaries[team.trajectory_id]["status"] == "running"
        finally:
            await back.stop()
    assert f.problems == []
    assert await qpool.fetchval("select silent_since from clusters where id = $1", team.cluster_id) is None


async def test_only_the_cluster_that_stopped_is_silent(quiet_world: World, qpool: asyncpg.Pool) -> None:
    """Three clusters with running jobs: one stops, one sends only its metrics (no job changes), and one whose
    jobs only the platform's own SQL writes (it never calls the ingest API, so nothing can tell that it is silent).
    Once the first is judged silent, the other two's jobs still run."""
    team = await make_team(qpool, quiet_world.secret)
    stopping = cluster_of(quiet_world, team, report_metrics=False)
    metrics_only = SimCluster(quiet_world.nodes[0].http, await add_cluster(qpool, team, "gpu-2"), workers=0)
    sql_only = await qpool.fetchval("insert into clusters (team_id, name) values ($1, 'gpu-3') returning id", team.id)
    await stopping.start()
    await metrics_only.start()
    try:
        stopped = await put(stopping, team, ["running"])
        kept = await put(metrics_only, team, ["running"])
        by_sql = await qpool.fetchval(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, status)"
            " values ($1, $2, $3, 'preprocess', 'Preprocess frame', 'running') returning id",
            team.id,
            team.trajectory_id,
            sql_only,
        )
        feed = f"team:{team.id}"
        async with Follower(quiet_world.nodes[0].ws, team.token) as f:
            await f.subscribe(feed)
            await f.wait_for(lambda f: (f.channels[feed].counts or {}).get("running") == 3)
            await stopping.stop()
            await f.wait_for(lambda f: (f.channels[feed].counts or {}).get("silent") == 1, timeout=60)
            assert (f.channels[feed].counts or {}).get("running") == 2
        silent = await qpool.fetch("select id from jobs where team_id = $1 and silent_since is not null", team.id)
        assert [r["id"] for r in silent] == stopped
        assert kept[0] not in [r["id"] for r in silent] and by_sql not in [r["id"] for r in silent]
    finally:
        await metrics_only.stop()


async def test_the_analysis_listing_counts_a_silent_clusters_frames_apart(
    quiet_world: World, qpool: asyncpg.Pool
) -> None:
    """The panel's Analyses tab says "3 to go (3 cluster silent)", never that they run or wait."""
    team = await make_team(qpool, quiet_world.secret)
    cluster = cluster_of(quiet_world, team, report_metrics=False)
    await cluster.start()
    try:
        analysis = await cluster.create_analysis(team.trajectory_id, "Radial Distribution Function")
        ids = await cluster.submit(
            [
                {
                    "trajectory_id": team.trajectory_id,
                    "kind": "analysis",
                    "name": "RDF",
                    "frame": i,
                    "analysis_id": analysis,
                }
                for i in range(3)
            ]
        )
        for job_id in ids[:2]:
            cluster.jobs[job_id].status = "running"
            cluster._report(cluster.jobs[job_id])
        await cluster.flushed()
    finally:
        await cluster.stop()  # and nothing more from it

    async def row() -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=quiet_world.nodes[0].http) as client:
            answer = await client.get(
                f"/api/trajectories/{team.trajectory_id}/analyses", headers={"Authorization": f"Bearer {team.token}"}
            )
        found: dict[str, Any] = answer.json()["analyses"][0]
        return found

    deadline = asyncio.get_running_loop().time() + 60
    while (await row())["silent"] != 3 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.2)
    listed = await row()
    assert {k: listed[k] for k in ("frames", "running", "queued", "silent")} == {
        "frames": 3,
        "running": 0,
        "queued": 0,
        "silent": 3,
    }
