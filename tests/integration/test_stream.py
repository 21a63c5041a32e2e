"""From a committed change in PostgreSQL to what a websocket subscriber holds."""

from __future__ import annotations

import asyncio
import random

import asyncpg

from gateway.core.batching import TEAM_INTERVAL
from gateway.core.status import LISTED
from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs, make_team


def trajectory(team: Team) -> str:
    return f"trajectory:{team.trajectory_id}"


async def test_raw_sql_update_reaches_subscriber_with_timestamps(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    (job_id,) = await insert_jobs(pool, team, 1)
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(trajectory(team))
        await f.wait_for(lambda f: job_id in f.listed(trajectory(team)))
        assert f.listed(trajectory(team))[job_id]["status"] == "queued"

        await pool.execute("update jobs set status = 'running' where id = $1", job_id)
        await f.wait_for(lambda f: f.listed(trajectory(team))[job_id]["status"] == "running")
        job = f.listed(trajectory(team))[job_id]
        assert job["version"] == 2
        assert job["started_at"] is not None and job["finished_at"] is None

        await pool.execute("update jobs set status = 'completed' where id = $1", job_id)
        await f.wait_for(lambda f: f.listed(trajectory(team))[job_id]["status"] == "completed")
        job = f.listed(trajectory(team))[job_id]
        assert job["version"] == 3
        assert job["finished_at"] >= job["started_at"]
        assert job["updated_at"] == job["finished_at"]
        assert f.problems == []


async def test_no_op_update_sends_nothing_and_keeps_version(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    (job_id,) = await insert_jobs(pool, team, 1)
    await pool.execute("update jobs set status = 'queued' where id = $1", job_id)
    assert await pool.fetchval("select version from jobs where id = $1", job_id) == 1


async def _writer(pool: asyncpg.Pool, ids: list[int], rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    statuses = ["queued", "running", "completed", "failed", "retrying"]
    for _ in range(rounds):
        async with pool.acquire() as conn, conn.transaction():
            picked = rng.sample(ids, 5)
            for job_id in sorted(picked):  # a fixed lock order: writers interleave but never deadlock
                await conn.execute("update jobs set status = $2 where id = $1", job_id, rng.choice(statuses))
            await asyncio.sleep(rng.random() * 0.003)  # hold the transaction open while others commit


async def test_concurrent_writers_converge_with_exact_counts(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    ids = await insert_jobs(pool, team, 200)
    async with Follower(stack.nodes[0].ws, team.token) as a, Follower(stack.nodes[1].ws, team.token) as b:
        for f in (a, b):
            await f.subscribe(trajectory(team))
            await f.subscribe(f"team:{team.id}")
            await f.subscribe(f"team-jobs:{team.id}")
        await a.wait_for(lambda f: len(f.listed(trajectory(team))) == 200)

        await asyncio.gather(*(_writer(pool, ids, 60, seed) for seed in range(8)))  # 8 x 60 x 5 = 2,400 updates

        rows = await pool.fetch("select id, status, version from jobs where trajectory_id = $1", team.trajectory_id)
        expected = {r["id"]: (r["status"], r["version"]) for r in rows}
        counts = dict.fromkeys(LISTED, 0)
        for status, _ in expected.values():
            counts[status] += 1

        def converged(f: Follower) -> bool:
            return (
                all(
                    {i: (j["status"], j["version"]) for i, j in f.listed(ch).items()} == expected
                    for ch in (trajectory(team), f"team-jobs:{team.id}")
                )
                and f.channels[f"team:{team.id}"].counts == counts
            )

        for f in (a, b):
            await f.wait_for(converged, timeout=20)
            summary = f.channels[f"team:{team.id}"].summaries[team.trajectory_id]
            assert summary["completed"] == counts["completed"] and summary["total"] == 200
            assert f.problems == []


async def test_two_nodes_each_deliver_to_their_own_subscribers(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    async with Follower(stack.nodes[0].ws, team.token) as a, Follower(stack.nodes[1].ws, team.token) as b:
        for f in (a, b):
            await f.subscribe(trajectory(team))
            await f.wait_for(lambda f: f.channels[trajectory(team)].snapshot_done)
        ids = await insert_jobs(pool, team, 30)
        for f in (a, b):
            await f.wait_for(lambda f: set(f.listed(trajectory(team))) == set(ids))
            assert f.problems == []


async def test_light_team_channel_is_rate_limited(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    ids = await insert_jobs(pool, team, 50)
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(f"team:{team.id}")
        await f.wait_for(lambda f: f.channels[f"team:{team.id}"].snapshot_done)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for job_id in ids:  # 50 commits, one per job, as fast as they go
            await pool.execute("update jobs set status = 'completed' where id = $1", job_id)
        await f.wait_for(lambda f: (f.channels[f"team:{team.id}"].counts or {}).get("completed") == 50)
        elapsed = loop.time() - started
        summaries = [m for m in f.messages if m["type"] == "summary"]
        # At most one per TEAM_INTERVAL, 2 a second (plus the one that may go out at once at the start).
        assert len(summaries) <= elapsed / TEAM_INTERVAL + 2, (len(summaries), elapsed)


async def test_foreign_team_is_refused_and_connection_keeps_serving(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    other = await make_team(pool, stack.secret)
    async with Follower(stack.nodes[0].ws, team.token) as f:
        for channel in (
            f"team:{other.id}",
            f"team-jobs:{other.id}",
            f"trajectory:{other.trajectory_id}",
            "trajectory:999999999",
        ):
            await f.subscribe(channel)
        await f.wait_for(lambda f: len(f.errors) == 4)
        assert {e["code"] for e in f.errors} == {"forbidden"}
        assert {e["channel"] for e in f.errors} == {
            f"team:{other.id}",
            f"team-jobs:{other.id}",
            f"trajectory:{other.trajectory_id}",
            "trajectory:999999999",
        }
        await insert_jobs(pool, other, 3)  # the other team's work never shows up here
        (mine,) = await insert_jobs(pool, team, 1)
        await f.subscribe(trajectory(team))
        await f.wait_for(lambda f: mine in f.listed(trajectory(team)))
        assert all(m.get("channel") != f"trajectory:{other.trajectory_id}" or m["type"] == "error" for m in f.messages)


async def test_a_member_removed_from_the_team_loses_live_subscriptions_on_every_node(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    from gateway.web.people.auth import issue_token

    leaver = await pool.fetchval("insert into users (name) values ('Leaver') returning id")
    await pool.execute("insert into memberships values ($1, $2)", team.id, leaver)
    token = issue_token(stack.secret, leaver, 3600)
    channels = (f"team:{team.id}", f"team-jobs:{team.id}", trajectory(team))
    async with (
        Follower(stack.nodes[0].ws, token) as a,
        Follower(stack.nodes[1].ws, token) as b,
        Follower(stack.nodes[0].ws, team.token) as stays,
    ):
        for f in (a, b, stays):
            for channel in channels:
                await f.subscribe(channel)
            await f.wait_for(lambda f: all(f.channels[c].snapshot_done for c in channels))
        await pool.execute("delete from memberships where team_id = $1 and user_id = $2", team.id, leaver)
        for f in (a, b):
            await f.wait_for(lambda f: len([e for e in f.errors if e["code"] == "forbidden"]) == 3, timeout=10)
            assert {e["channel"] for e in f.errors} == set(channels)
        (job_id,) = await insert_jobs(pool, team, 1)
        await stays.wait_for(lambda f: job_id in f.listed(trajectory(team)))
        await asyncio.sleep(0.5)
        assert job_id not in a.listed(trajectory(team)) and job_id not in b.listed(trajectory(team))
        await a.subscribe(trajectory(team))
        await a.wait_for(lambda f: len(f.errors) == 4)
        assert a.errors[-1]["code"] == "forbidden"
