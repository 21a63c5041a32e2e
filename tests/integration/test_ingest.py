"""`POST /api/ingest/jobs`: clusters create and report jobs; the rules hold whatever order reports come in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs, make_team


async def post(stack: Stack, key: str | None, body: object, raw: bytes | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        if raw is not None:
            return await client.post(
                "/api/ingest/jobs", content=raw, headers={**headers, "content-type": "application/json"}
            )
        return await client.post("/api/ingest/jobs", json=body, headers=headers)


async def job_row(pool: asyncpg.Pool, job_id: int) -> asyncpg.Record:
    return await pool.fetchrow(
        "select status, attempts, error, version, started_at, finished_at from jobs where id = $1", job_id
    )


async def test_create_and_report_reach_subscribers(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    async with Follower(stack.nodes[1].ws, team.token) as f:
        channel = f"trajectory:{team.trajectory_id}"
        await f.subscribe(channel)
        response = await post(
            stack,
            team.cluster_key,
            {
                "jobs": [
                    {
                        "status": "queued",
                        "trajectory_id": team.trajectory_id,
                        "kind": "rasterize",
                        "name": "Rasterize trajectory preview",
                    },
                ]
            },
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["created"] == 1
        job_id = body["jobs"][0]["id"]
        response = await post(
            stack,
            team.cluster_key,
            {
                "jobs": [
                    {"id": job_id, "status": "running"},
                    {"id": job_id, "status": "failed", "error": "GPU fell off the bus"},
                ]
            },
        )
        assert response.json()["updated"] == 2
        await f.wait_for(lambda f: f.listed(channel).get(job_id, {}).get("status") == "failed")
        assert f.listed(channel)[job_id]["error"] == "GPU fell off the bus"


async def test_stale_attempt_and_late_queued_are_ignored(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    (job_id,) = await insert_jobs(pool, team, 1)
    ok = await post(stack, team.cluster_key, {"jobs": [{"id": job_id, "attempt": 2, "status": "running"}]})
    assert ok.json()["jobs"] == [{"id": job_id, "result": "updated"}]
    stale = await post(
        stack, team.cluster_key, {"jobs": [{"id": job_id, "attempt": 1, "status": "failed", "error": "old"}]}
    )
    assert stale.json()["jobs"] == [{"id": job_id, "result": "ignored"}]
    late = await post(stack, team.cluster_key, {"jobs": [{"id": job_id, "attempt": 2, "status": "queued"}]})
    assert late.json()["ignored"] == 1
    row = await job_row(pool, job_id)
    assert (row["status"], row["attempts"], row["error"]) == ("running", 2, None)


async def test_terminal_status_sticks_until_retried(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    (job_id,) = await insert_jobs(pool, team, 1)
    await post(stack, team.cluster_key, {"jobs": [{"id": job_id, "status": "completed"}]})
    again = await post(stack, team.cluster_key, {"jobs": [{"id": job_id, "status": "running"}]})
    assert again.json()["ignored"] == 1
    retried = await post(stack, team.cluster_key, {"jobs": [{"id": job_id, "attempt": 2, "status": "retrying"}]})
    assert retried.json()["updated"] == 1
    assert (await job_row(pool, job_id))["status"] == "retrying"


async def test_removed_job_stays_removed(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    (job_id,) = await insert_jobs(pool, team, 1)
    await pool.execute("update jobs set removed_at = now() where id = $1", job_id)
    late = await post(stack, team.cluster_key, {"jobs": [{"id": job_id, "attempt": 5, "status": "running"}]})
    assert late.json()["ignored"] == 1
    assert (await job_row(pool, job_id))["status"] == "queued"


async def test_a_cluster_reports_a_job_it_removed_and_it_leaves_the_list(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    running, stale = await insert_jobs(pool, team, 2)
    await pool.execute(
        "update jobs set status = 'running', attempts = 2 where id = any($1::bigint[])", [running, stale]
    )
    async with Follower(stack.nodes[1].ws, team.token) as f:
        channel = f"trajectory:{team.trajectory_id}"
        await f.subscribe(channel)
        await f.wait_for(lambda f: len(f.listed(channel)) == 2)
        response = await post(
            stack,
            team.cluster_key,
            {
                "jobs": [
                    {"id": running, "attempt": 2, "status": "running", "removed": True},
                    {"id": stale, "attempt": 1, "status": "running", "removed": True},  # an older attempt's
                ]
            },
        )
        assert (response.json()["updated"], response.json()["ignored"]) == (1, 1)
        await f.wait_for(lambda f: list(f.listed(channel)) == [stale])
    removed = await pool.fetch(
        "select id from jobs where id = any($1::bigint[]) and removed_at is not null", [running, stale]
    )
    assert [r["id"] for r in removed] == [running]


@pytest.mark.parametrize(
    ("body", "status", "names"),
    [
        ({"jobs": [{"id": "seven", "status": "running"}]}, 422, "$.jobs[0].id"),
        ({"jobs": [{"id": 1, "status": "exploded"}]}, 422, "$.jobs[0].status"),
        ({"jobs": [{"id": 1, "status": "running", "colour": "red"}]}, 422, "colour"),
        ({"jobs": [{"status": "queued", "kind": "preprocess"}]}, 422, "jobs[0]: a new job needs trajectory_id, name"),
        ({"jobs": []}, 422, "$.jobs"),
        ({"jobs": [{"id": 1, "status": "running", "attempt": 0}]}, 422, "$.jobs[0].attempt"),
        (
            {"jobs": [{"status": "queued", "kind": "preprocess", "trajectory_id": 1, "name": "p", "removed": True}]},
            422,
            "jobs[0].removed: a new job cannot be removed",
        ),
    ],
)
async def test_invalid_reports_name_the_bad_field(
    stack: Stack, team: Team, body: object, status: int, names: str
) -> None:
    response = await post(stack, team.cluster_key, body)
    assert response.status_code == status
    assert names in response.json()["message"]


async def test_malformed_and_oversize_bodies_are_refused(stack: Stack, team: Team) -> None:
    malformed = await post(stack, team.cluster_key, None, raw=b'{"jobs": [')
    assert malformed.status_code == 400 and malformed.json()["error"] == "malformed"
    huge = await post(stack, team.cluster_key, None, raw=b'{"jobs": [' + b" " * (9 << 20) + b"]}")
    assert huge.status_code == 413


async def test_batch_is_all_or_nothing(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    other = await make_team(pool, stack.secret)
    (mine,) = await insert_jobs(pool, team, 1)
    (theirs,) = await insert_jobs(pool, other, 1)
    response = await post(
        stack,
        team.cluster_key,
        {
            "jobs": [
                {"id": mine, "status": "running"},
                {"status": "queued", "trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "frame"},
                {"id": theirs, "status": "completed"},
            ]
        },
    )
    assert response.status_code == 422
    assert response.json()["message"] == f"jobs[2].id: no job {theirs} on this cluster"
    assert (await job_row(pool, mine))["status"] == "queued"
    assert (await job_row(pool, theirs))["status"] == "queued"
    assert await pool.fetchval("select count(*) from jobs where trajectory_id = $1", team.trajectory_id) == 1


async def test_new_job_on_a_foreign_trajectory_is_refused(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    other = await make_team(pool, stack.secret)
    response = await post(
        stack,
        team.cluster_key,
        {
            "jobs": [
                {"status": "queued", "trajectory_id": other.trajectory_id, "kind": "preprocess", "name": "frame"},
            ]
        },
    )
    assert response.status_code == 422
    assert "jobs[0].trajectory_id" in response.json()["message"]


@pytest.mark.parametrize("key", [None, "nonsense", "c1.wrong-secret", "c999999.whatever"])
async def test_bad_cluster_keys_are_refused(stack: Stack, team: Team, key: str | None) -> None:
    response = await post(stack, key, {"jobs": [{"id": 1, "status": "running"}]})
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"


async def test_a_job_whose_running_report_was_folded_keeps_how_long_it_took(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """`took` was missing on a quarter of the completed jobs: their `running` and `completed` came in one batch, the
    batch folds them into the one that wins, and no start was recorded. A cluster says when the worker started."""
    folded, told, future = await insert_jobs(pool, team, 3)
    started = datetime.now(UTC) - timedelta(seconds=42)
    batch = [
        {"id": folded, "status": "running"},
        {"id": folded, "status": "completed"},  # its start unknown: none is made up
        {"id": told, "status": "running"},
        {"id": told, "status": "completed", "started_at": started.isoformat()},
        {"id": future, "status": "completed", "started_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat()},
    ]
    assert (await post(stack, team.cluster_key, {"jobs": batch})).status_code == 200
    row = await job_row(pool, told)
    assert row["status"] == "completed" and abs((row["started_at"] - started).total_seconds()) < 0.001
    assert 41 < (row["finished_at"] - row["started_at"]).total_seconds() < 120  # took about 42 s
    assert (await job_row(pool, folded))["started_at"] is None
    ahead = await job_row(pool, future)  # a cluster's clock ahead of the database's: never a start after now
    assert ahead["started_at"] <= ahead["finished_at"]
