"""What the Jobs view knows, end to end: counts and summaries, frame groups, finish notices and glows (and none
for work a person removed)."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx

from gateway.sim.cluster import SimCluster
from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs
from tests.integration.test_actions import work


def events(f: Follower, kind: str) -> list[dict]:  # type: ignore[type-arg]
    return [m for m in f.messages if m["type"] == kind]


async def test_counts_and_summaries_after_a_10000_job_burst(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    team_channel = f"team:{team.id}"
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(team_channel)
        await f.wait_for(lambda f: f.channels[team_channel].snapshot_done)
        ids = await insert_jobs(pool, team, 10_000)
        await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids[:6000])
        await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids[:5000])
        await pool.execute("update jobs set status = 'failed' where id = any($1::bigint[])", ids[5000:5500])
        expected = {
            "queued": 4000,
            "retrying": 0,
            "running": 500,
            "completed": 5000,
            "failed": 500,
            "holding": 0,
            "preempted": 0,
            "silent": 0,
        }
        await f.wait_for(lambda f: f.channels[team_channel].counts == expected, timeout=30)
        summary = f.channels[team_channel].summaries[team.trajectory_id]
        assert (summary["completed"], summary["total"], summary["status"]) == (5000, 10_000, "running")
        assert f.problems == []
        # The light channel stayed light: a handful of summaries, not one per change.
        assert len(events(f, "summary")) < 40


async def test_frame_groups_carry_their_colour_from_the_server(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    channel = f"trajectory:{team.trajectory_id}"
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, timestep, status) values"
        " ($1, $2, $3, 'analysis', 'Polyhedral Template Matching', 0, 0.5, 'completed'),"
        " ($1, $2, $3, 'analysis', 'Radial Distribution Function', 0, 0.5, 'failed'),"
        " ($1, $2, $3, 'preprocess', 'Preprocess trajectory frame', 1, 1.0, 'running'),"
        " ($1, $2, $3, 'rasterize', 'Rasterize trajectory preview', null, null, 'queued'),"
        " ($1, $2, $3, 'storage_transfer', 'Storage Transfer', null, null, 'queued')",
        team.id,
        team.trajectory_id,
        team.cluster_id,
    )
    async with Follower(stack.nodes[1].ws, team.token) as f:
        await f.subscribe(channel)
        await f.wait_for(lambda f: f.channels[channel].snapshot_done)
        groups = {g["key"]: g for m in events(f, "snapshot") for g in m.get("groups") or ()}
        assert {k: (g["label"], g["status"]) for k, g in groups.items()} == {
            "frame:0": ("Frame 0", "neutral"),
            "frame:1": ("Frame 1", "running"),
            "general": ("General", "queued"),
            "transfers": ("Storage Transfer", "queued"),
        }
        assert groups["frame:0"]["timestep"] == 0.5 and groups["transfers"]["open"] is True
        await pool.execute(
            "update jobs set status = 'completed' where trajectory_id = $1 and frame = 1", team.trajectory_id
        )
        await f.wait_for(
            lambda f: any(
                g["key"] == "frame:1" and g["status"] == "completed"
                for m in events(f, "batch")
                for g in m.get("groups") or ()
            )
        )


async def test_a_finish_fires_one_notice_and_one_glow(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    channel, team_channel = f"trajectory:{team.trajectory_id}", f"team:{team.id}"
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(channel)
        await f.subscribe(team_channel)
        await f.wait_for(lambda f: all(s.snapshot_done for s in f.channels.values()))
        ids = await insert_jobs(pool, team, 5)
        await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids)
        await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
        await f.wait_for(lambda f: len(events(f, "notice")) == 2 and events(f, "glow"), timeout=10)
        await asyncio.sleep(1.5)  # nothing more comes
        notice, team_notice = sorted(events(f, "notice"), key=lambda m: m["channel"] != channel)
        (glow,) = events(f, "glow")
        assert (notice["channel"], notice["title"], notice["level"], notice["trajectory_id"], notice["name"]) == (
            channel,
            "Jobs completed successfully",
            "success",
            team.trajectory_id,
            await pool.fetchval("select name from trajectories where id = $1", team.trajectory_id),
        )
        # The team channel carries it too: a page hears every finish of its team, whichever panel is open.
        assert team_notice["channel"] == team_channel
        assert {k: v for k, v in team_notice.items() if k not in ("channel", "seq", "cursor")} == {
            k: v for k, v in notice.items() if k not in ("channel", "seq", "cursor")
        }
        assert (glow["channel"], glow["trajectory_id"], glow["wave"]) == (
            team_channel,
            team.trajectory_id,
            notice["wave"],
        )
        assert f.problems == []


async def test_a_chunked_upload_does_not_finish_early(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    channel = f"trajectory:{team.trajectory_id}"
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(channel)
        await f.wait_for(lambda f: f.channels[channel].snapshot_done)
        for _chunk in range(4):  # each chunk is done before the next arrives, 0.2 s later
            ids = await insert_jobs(pool, team, 25)
            await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
            await asyncio.sleep(0.2)
        await pool.execute(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, status) values ($1, $2, $3, 'rasterize', 'Rasterize trajectory preview', 'failed')",
            team.id,
            team.trajectory_id,
            team.cluster_id,
        )
        await f.wait_for(lambda f: events(f, "notice"), timeout=10)
        await asyncio.sleep(1.5)
        (notice,) = events(f, "notice")
        assert (notice["title"], notice["level"]) == ("Rasterization completed with errors", "warning")


async def test_remove_running_jobs_fires_no_notice_and_no_glow(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    """A removal is not a completion: a wave whose work a person removed (some of its frames completed first)
    ends without a notice or a glow, and the next wave is told as usual."""
    cluster = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await cluster.start()
    channel, team_channel = f"trajectory:{team.trajectory_id}", f"team:{team.id}"
    try:
        async with Follower(stack.nodes[0].ws, team.token) as f:
            await f.subscribe(channel)
            await f.subscribe(team_channel)
            await f.wait_for(lambda f: all(s.snapshot_done for s in f.channels.values()))
            ids = await work(cluster, team, 4, "running")
            cluster.jobs[ids[0]].status = "completed"  # one frame completed, the others are removed
            cluster._report(cluster.jobs[ids[0]])
            await cluster.flushed()
            await f.wait_for(lambda f: f.listed(channel).get(ids[0], {}).get("status") == "completed")
            async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
                response = await client.post(
                    f"/api/trajectories/{team.trajectory_id}/remove-running",
                    headers={"Authorization": f"Bearer {team.token}"},
                )
            assert response.json()["message"] == "Removed 3 job(s)"
            await f.wait_for(lambda f: set(f.listed(channel)) == {ids[0]})

            async def closed() -> bool:  # the relay finished the wave (silently) and recorded it
                row = await pool.fetchrow(
                    "select wave, open from trajectory_waves where trajectory_id = $1", team.trajectory_id
                )
                return row is not None and not row["open"]

            deadline = asyncio.get_running_loop().time() + 10
            while not await closed():
                assert asyncio.get_running_loop().time() < deadline, "the removed wave never finished"
                await asyncio.sleep(0.05)
            more = await insert_jobs(pool, team, 2)  # new work: a new wave, told as usual
            await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", more)
            await f.wait_for(lambda f: len(events(f, "notice")) == 2 and events(f, "glow"), timeout=10)
            assert {(m["channel"], m["wave"]) for m in events(f, "notice")} == {(channel, 2), (team_channel, 2)}
            assert [g["wave"] for g in events(f, "glow")] == [2]  # what is listed now all completed
            assert f.problems == []
    finally:
        await cluster.stop()
