"""Remove Running Jobs and Retry Failed Jobs, carried out by clusters that confirm (or do not) through the gateway."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.sim.cluster import SimCluster
from gateway.web.people.auth import new_cluster_key
from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs, make_team


async def add_cluster(pool: asyncpg.Pool, team: Team, name: str) -> str:
    cluster_id = await pool.fetchval("insert into clusters (team_id, name) values ($1, $2) returning id", team.id, name)
    key, key_hash = new_cluster_key(cluster_id)
    await pool.execute("update clusters set key_hash = $2 where id = $1", cluster_id, key_hash)
    return key


@pytest.fixture
async def clusters(stack: Stack, pool: asyncpg.Pool, team: Team) -> AsyncIterator[tuple[SimCluster, SimCluster]]:
    """Two clusters of the team whose workers never get to work (no workers): jobs stay where we put them."""
    gpu1 = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0)
    gpu2 = SimCluster(stack.nodes[1].http, await add_cluster(pool, team, "gpu-2"), workers=0)
    for c in (gpu1, gpu2):
        await c.start()
    yield gpu1, gpu2
    for c in (gpu1, gpu2):
        await c.stop()


async def act(stack: Stack, team: Team, path: str, token: str | None = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        return await client.post(path, headers={"Authorization": f"Bearer {token or team.token}"})


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """An action's answer as a tool reads it: the toast, how many changed, who did not confirm, the level."""
    return {k: body[k] for k in ("message", "acted", "unconfirmed", "level")}


async def work(cluster: SimCluster, team: Team, n: int, status: str = "queued") -> list[int]:
    ids = await cluster.submit(
        [
            {
                "trajectory_id": team.trajectory_id,
                "kind": "preprocess",
                "name": "Preprocess trajectory frame",
                "frame": i,
            }
            for i in range(n)
        ]
    )
    if status != "queued":
        for job_id in ids:
            cluster.jobs[job_id].status = status
            cluster._report(cluster.jobs[job_id], error="boom" if status == "failed" else None)
        await cluster.flushed()
        await cluster.flushed()
    return ids


async def test_remove_running_jobs_with_every_cluster_confirming(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, gpu2 = clusters
    a = await work(gpu1, team, 2, "running")
    b = await work(gpu2, team, 2)
    done = await work(gpu1, team, 1, "completed")
    channel = f"trajectory:{team.trajectory_id}"
    async with Follower(stack.nodes[1].ws, team.token) as f:
        await f.subscribe(channel)
        await f.wait_for(lambda f: len(f.listed(channel)) == 5)
        response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running")
        assert response.status_code == 200
        assert response.json() == {"message": "Removed 4 job(s)", "acted": 4, "unconfirmed": [], "level": "success"}
        await f.wait_for(lambda f: set(f.listed(channel)) == set(done))  # everyone watching sees it
    assert (
        await pool.fetchval("select count(*) from jobs where id = any($1::bigint[]) and removed_at is not null", a + b)
        == 4
    )
    again = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running")
    assert (again.json()["message"], again.json()["level"]) == ("No queued or running jobs found", "info")


async def test_a_cluster_that_does_not_confirm_is_named_and_its_own_reports_remove_its_jobs(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    """The reply is lost, the work is not: gpu-2 stopped its jobs and reports them removed, as a cluster's
    daemon reports every state it sees, so none of them stays listed as running for ever."""
    gpu1, gpu2 = clusters
    gpu2.confirm = False
    a = await work(gpu1, team, 3)
    b = await work(gpu2, team, 2, "running")
    channel = f"trajectory:{team.trajectory_id}"
    async with Follower(stack.nodes[1].ws, team.token) as f:
        await f.subscribe(channel)
        await f.wait_for(lambda f: len(f.listed(channel)) == 5)
        response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running")
        assert reply(response.json()) == {
            "message": "Removed 3 job(s); 2 on gpu-2 not confirmed yet",
            "acted": 3,
            "unconfirmed": ["gpu-2"],
            "level": "warning",
        }
        # What the browser follows to say the rest as gpu-2's reports land: which jobs, where, on which attempt.
        assert {k: response.json()[k] for k in ("found", "done", "doing", "becomes", "pending")} == {
            "found": 5,
            "done": "Removed {n} job(s)",
            "doing": "Removing {n} job(s)",
            "becomes": "removed",
            "pending": [
                {
                    "cluster": "gpu-2",
                    "count": 2,
                    "jobs": [[i, team.trajectory_id, 1] for i in sorted(b)],
                    "silent_seconds": None,
                    "submissions": [],  # Retry Sync's part names submissions here
                }
            ],
        }
        await f.wait_for(lambda f: f.listed(channel) == {})
    removed = await pool.fetchval(
        "select count(*) from jobs where id = any($1::bigint[]) and removed_at is not null", a + b
    )
    assert removed == 5


async def test_a_cluster_that_does_not_listen_is_named_without_waiting(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, gpu2 = clusters
    await work(gpu1, team, 1, "failed")
    offline_key = await add_cluster(pool, team, "tape-9")
    offline = SimCluster(stack.nodes[0].http, offline_key, workers=0)
    await offline.submit(
        [{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "x", "frame": 0, "status": "failed"}]
    )
    await offline.http.aclose()
    started = asyncio.get_running_loop().time()
    response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/retry-failed")
    assert response.json()["message"] == "Queued 1 failed job(s) for retry; 1 on tape-9 not confirmed yet"
    assert response.json()["level"] == "warning"
    assert asyncio.get_running_loop().time() - started < 2.5  # nobody listened: no need to wait it out


async def test_retry_failed_jobs_queues_them_again(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, gpu2 = clusters
    failed = await work(gpu1, team, 2, "failed") + await work(gpu2, team, 1, "failed")
    await work(gpu1, team, 1, "completed")
    response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/retry-failed")
    assert response.json()["message"] == "Queued 3 failed job(s) for retry"
    rows = await pool.fetch("select status, attempts, error from jobs where id = any($1::bigint[])", failed)
    assert {(r["status"], r["attempts"], r["error"]) for r in rows} == {("retrying", 2, None)}
    again = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/retry-failed")
    assert again.json()["message"] == "No failed jobs found to retry"


async def test_retry_failed_frames_of_one_analysis(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    ptm = await gpu1.create_analysis(team.trajectory_id, "Polyhedral Template Matching")
    rdf = await gpu1.create_analysis(team.trajectory_id, "Radial Distribution Function")
    jobs = await gpu1.submit(
        [
            {"trajectory_id": team.trajectory_id, "kind": "analysis", "name": p, "analysis_id": a, "frame": f}
            for a, p in ((ptm, "PTM"), (rdf, "RDF"))
            for f in range(2)
        ]
    )
    for job_id in jobs:
        gpu1.jobs[job_id].status = "failed"
        gpu1._report(gpu1.jobs[job_id], error="boom")
    await gpu1.flushed()
    await gpu1.flushed()
    response = await act(stack, team, f"/api/analyses/{ptm}/retry-failed")
    assert response.json()["message"] == "Queued 2 failed job(s) for retry"
    assert await pool.fetchval("select count(*) from jobs where analysis_id = $1 and status = 'failed'", rdf) == 2


async def test_a_late_report_after_removal_is_ignored(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    (job_id,) = await work(gpu1, team, 1, "running")
    await act(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running")
    late = await gpu1.http.post("/api/ingest/jobs", json={"jobs": [{"id": job_id, "status": "completed"}]})
    assert late.json()["jobs"] == [{"id": job_id, "result": "ignored"}]
    assert await pool.fetchval("select status from jobs where id = $1", job_id) == "running"


async def test_only_members_may_act(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    outsider = await make_team(pool, stack.secret)
    response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running", token=outsider.token)
    assert response.status_code == 403 and response.json()["error"] == "forbidden"
    unauthenticated = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/retry-failed", token="nope")
    assert unauthenticated.status_code == 401


async def test_retry_failed_jobs_takes_preempted_ones_and_says_how_many(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    failed = await work(gpu1, team, 2, "failed")
    preempted = await work(gpu1, team, 1, "preempted")
    response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/retry-failed")
    assert response.json() == {
        "message": "Queued 3 failed job(s) for retry (1 of them preempted)",
        "acted": 3,
        "unconfirmed": [],
        "level": "success",
    }
    rows = await pool.fetch("select status, attempts from jobs where id = any($1::bigint[])", failed + preempted)
    assert {(r["status"], r["attempts"]) for r in rows} == {("retrying", 2)}
    # The cluster got `retry_preempted` for the preempted one (its `retry_failed` would not have taken it).
    assert [gpu1.jobs[i].status for i in preempted] == ["retrying"]


async def test_retry_failed_jobs_with_a_cluster_that_does_not_confirm_is_a_warning_naming_it(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, gpu2 = clusters
    gpu2.confirm = False
    await work(gpu1, team, 1, "failed")
    silent = await work(gpu2, team, 1, "failed") + await work(gpu2, team, 1, "preempted")
    body = (await act(stack, team, f"/api/trajectories/{team.trajectory_id}/retry-failed")).json()
    assert reply(body) == {
        "message": "Queued 1 failed job(s) for retry; 2 on gpu-2 not confirmed yet",
        "acted": 1,
        "unconfirmed": ["gpu-2"],
        "level": "warning",
    }
    # The reply was lost, not the work: gpu-2's own reports bring the new attempts.
    await gpu2.flushed()
    rows = await pool.fetch("select status, attempts from jobs where id = any($1::bigint[])", silent)
    assert [(r["status"], r["attempts"]) for r in rows] == [("retrying", 2), ("retrying", 2)]


async def test_nothing_confirmed_is_never_a_success(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    _, gpu2 = clusters
    gpu2.confirm = False
    await work(gpu2, team, 2, "running")
    body = (await act(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running")).json()
    assert reply(body) == {
        "message": "Removing 2 job(s) on gpu-2: not confirmed yet",
        "acted": 0,
        "unconfirmed": ["gpu-2"],
        "level": "warning",
    }


async def analysis(cluster: SimCluster, team: Team, plugin: str, statuses: list[str]) -> tuple[int, list[int]]:
    """An analysis whose frame jobs are in these statuses."""
    analysis_id = await cluster.create_analysis(team.trajectory_id, plugin)
    ids = await cluster.submit(
        [
            {
                "trajectory_id": team.trajectory_id,
                "kind": "analysis",
                "name": plugin,
                "analysis_id": analysis_id,
                "frame": f,
            }
            for f in range(len(statuses))
        ]
    )
    for job_id, status in zip(ids, statuses):
        if status != "queued":
            cluster.jobs[job_id].status = status
            cluster._report(cluster.jobs[job_id], error="boom" if status == "failed" else None)
    await cluster.flushed()
    await cluster.flushed()
    return analysis_id, ids


async def test_retry_failed_frames_with_a_silent_cluster(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    _, gpu2 = clusters
    gpu2.confirm = False
    ptm, _ = await analysis(gpu2, team, "Polyhedral Template Matching", ["failed", "preempted", "completed"])
    body = (await act(stack, team, f"/api/analyses/{ptm}/retry-failed")).json()
    assert (body["message"], body["level"]) == (
        "Queueing 2 failed job(s) for retry on gpu-2: not confirmed yet",
        "warning",
    )


async def listing(stack: Stack, team: Team, token: str | None = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.nodes[1].http) as client:
        return await client.get(
            f"/api/trajectories/{team.trajectory_id}/analyses",
            headers={"Authorization": f"Bearer {token or team.token}"},
        )


async def delete(stack: Stack, team: Team, analysis_id: int, token: str | None = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        return await client.delete(
            f"/api/analyses/{analysis_id}", headers={"Authorization": f"Bearer {token or team.token}"}
        )


async def test_the_analysis_listing_counts_frames_newest_first(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    ptm, _ = await analysis(
        gpu1,
        team,
        "Polyhedral Template Matching",
        ["completed", "completed", "failed", "preempted", "running", "queued"],
    )
    rdf, _ = await analysis(gpu1, team, "Radial Distribution Function", ["completed"])
    response = await listing(stack, team)
    assert response.status_code == 200
    rows = response.json()["analyses"]
    assert [r["id"] for r in rows] == [rdf, ptm]
    assert {k: rows[1][k] for k in ("plugin", "frames", "completed", "failed", "running", "queued")} == {
        "plugin": "Polyhedral Template Matching",
        "frames": 6,
        "completed": 2,
        "failed": 2,
        "running": 1,
        "queued": 1,
    }
    assert rows[1]["created_at"]


async def test_delete_analysis_stops_its_jobs_and_deletes_its_results(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    ptm, ids = await analysis(gpu1, team, "Polyhedral Template Matching", ["completed", "failed", "running", "queued"])
    rdf, kept = await analysis(gpu1, team, "Radial Distribution Function", ["completed"])
    channel = f"trajectory:{team.trajectory_id}"
    async with Follower(stack.nodes[1].ws, team.token) as f:
        await f.subscribe(channel)
        await f.wait_for(lambda f: len(f.listed(channel)) == 5)
        response = await delete(stack, team, ptm)
        assert response.status_code == 200
        assert response.json() == {
            "message": "Deleted analysis Polyhedral Template Matching: stopped 2 job(s), deleted 2 result(s)",
            "acted": 4,
            "unconfirmed": [],
            "level": "success",
        }
        await f.wait_for(lambda f: set(f.listed(channel)) == set(kept))  # everyone watching sees its results go
    assert [gpu1.jobs[i].removed for i in ids] == [False, False, True, True]  # the cluster stopped the unfinished ones
    assert [r["id"] for r in (await listing(stack, team)).json()["analyses"]] == [rdf]
    assert (await delete(stack, team, ptm)).status_code == 404  # once


async def test_delete_analysis_with_a_silent_cluster_deletes_nothing_and_names_it(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    _, gpu2 = clusters
    gpu2.confirm = False
    ptm, ids = await analysis(gpu2, team, "Polyhedral Template Matching", ["completed", "running"])
    body = (await delete(stack, team, ptm)).json()
    assert body == {
        "message": "Polyhedral Template Matching not deleted yet: 1 on gpu-2 not confirmed yet; delete it again once"
        " they have stopped",
        "acted": 0,
        "unconfirmed": ["gpu-2"],
        "level": "warning",
    }
    assert [r["id"] for r in (await listing(stack, team)).json()["analyses"]] == [ptm]
    # gpu-2 did stop its job and reports it removed (nothing stays queued for good); the result it made stays,
    # and deleting again finds nothing running.
    await gpu2.flushed()
    rows = await pool.fetch(
        "select removed_at is null as listed from jobs where id = any($1::bigint[]) order by id", ids
    )
    assert [r["listed"] for r in rows] == [True, False]
    again = (await delete(stack, team, ptm)).json()
    assert (again["message"], again["level"]) == (
        "Deleted analysis Polyhedral Template Matching: deleted 1 result(s)",
        "success",
    )


async def test_only_members_may_list_or_delete_analyses(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    ptm, _ = await analysis(gpu1, team, "Polyhedral Template Matching", ["completed"])
    outsider = await make_team(pool, stack.secret)
    assert (await listing(stack, team, token=outsider.token)).status_code == 403
    refused = await delete(stack, team, ptm, token=outsider.token)
    assert (
        refused.status_code == 403 and refused.json()["message"] == "only members of the team may delete its analyses"
    )
    assert await pool.fetchval("select deleted_at from analyses where id = $1", ptm) is None


async def test_the_confirmation_before_an_action_names_a_silent_cluster(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """A silent cluster's jobs: the confirmation before Remove Running Jobs named neither the cluster's silence
    nor that it would act only once it reports again."""
    await insert_jobs(pool, team, 3)
    await pool.execute("update clusters set silent_since = now() - interval '5 minutes' where id = $1", team.cluster_id)
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        preview = await client.get(
            f"/api/trajectories/{team.trajectory_id}/remove-running/preview",
            headers={"Authorization": f"Bearer {team.token}"},
        )
    assert preview.status_code == 200, preview.text
    (share,) = preview.json()["clusters"]
    assert (share["name"], share["tasks"]) == ("gpu-1", 3)
    assert 295 <= share["silent_seconds"] < 400


async def test_retry_failed_jobs_runs_again_failures_the_cluster_finished_long_ago(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    # A cluster holding only 3 finished jobs whole: the 8 failures below are long past that when retried.
    cluster = SimCluster(stack.nodes[0].http, team.cluster_key, workers=2, fail_rate=1.0, speed=200, finished_kept=3)
    await cluster.start()
    try:
        failed = await work(cluster, team, 8)
        deadline = asyncio.get_running_loop().time() + 30
        while await pool.fetchval("select count(*) from jobs where id = any($1) and status = 'failed'", failed) < 8:
            assert asyncio.get_running_loop().time() < deadline, "the jobs never failed"
            await asyncio.sleep(0.1)
        assert len([i for i in failed if i in cluster.jobs]) <= 3
        cluster.fail_rate = 0.0
        response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/retry-failed")
        assert response.json()["message"] == "Queued 8 failed job(s) for retry"
        while await pool.fetchval("select count(*) from jobs where id = any($1) and status = 'completed'", failed) < 8:
            assert asyncio.get_running_loop().time() < deadline + 30, "the retried jobs never ran again"
            await asyncio.sleep(0.1)
        # Each ran as its next attempt: three attempts failed, the fourth completed.
        assert set(await pool.fetch("select attempts from jobs where id = any($1)", failed)) == {(4,)}
    finally:
        await cluster.stop()


async def test_a_removed_job_says_who_removed_it(
    stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    """Removed jobs leave the list; their last delta names who removed them ("Removed by Ada Lovelace at 20:16"),
    also those whose cluster's report of the removal landed first."""
    gpu1, gpu2 = clusters
    removed = await work(gpu1, team, 2, "running") + await work(gpu2, team, 1)
    name = await pool.fetchval("select name from users where id = $1", team.user_id)
    channel = f"trajectory:{team.trajectory_id}"

    def removed_by(f: Follower) -> dict[int, str]:
        return {
            j["id"]: j["removed_by"]
            for m in f.messages
            if m.get("channel") == channel
            for j in m.get("jobs") or ()
            if j.get("removed_at") and j.get("removed_by")
        }

    async with Follower(stack.nodes[1].ws, team.token) as f:
        await f.subscribe(channel)
        await f.wait_for(lambda f: len(f.listed(channel)) == 3)
        response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running")
        assert response.json()["message"] == "Removed 3 job(s)"
        await f.wait_for(lambda f: removed_by(f) == {i: name for i in removed}, timeout=30)
    stored = await pool.fetch("select removed_by from jobs where id = any($1::bigint[])", removed)
    assert {r["removed_by"] for r in stored} == {name}
