"""What the Jobs view knows, end to end: counts and summaries, frame groups, finish notices and glows."""

from __future__ import annotations

import asyncio

import asyncpg

from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs


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
        await f.wait_for(lambda f: events(f, "notice") and events(f, "glow"), timeout=10)
        await asyncio.sleep(1.5)  # nothing more comes
        (notice,) = events(f, "notice")
        (glow,) = events(f, "glow")
        assert (notice["title"], notice["level"], notice["trajectory_id"]) == (
            "Jobs completed successfully",
            "success",
            team.trajectory_id,
        )
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
