"""broadcaster-pg's feed (bench/peers/notify_trigger.py): a row trigger that NOTIFYs each job change, with the
team's counts, there only between install and drop."""

from __future__ import annotations

import asyncio
import json

import asyncpg

from bench.load import build_world, team_counts
from bench.peers import notify_trigger

STEP = "update jobs set status = 'running' where id = $1"


def test_the_last_counts_include_a_transaction_that_committed_meanwhile(url: str) -> None:
    async def main() -> None:
        pool = await asyncpg.create_pool(url, min_size=3, max_size=3)
        listener = await asyncpg.connect(url)
        try:
            world = await build_world(pool, teams=1, trajectories_per_team=2, jobs_per_trajectory=3)
            team = world.teams[0]
            first, second = (world.jobs[t][0] for t in world.trajectories[team])
            notify_trigger.install(url)
            got: list[tuple[str, dict]] = []
            for channel in [f"bench:team:{team}", *(f"bench:trajectory:{t}" for t in world.trajectories[team])]:
                await listener.add_listener(
                    channel, lambda _c, _p, channel, payload: got.append((channel, json.loads(payload)))
                )
            async with pool.acquire() as one, pool.acquire() as two:
                async with one.transaction():
                    await one.execute(STEP, first)
                    # Counted beside `one`'s uncommitted change, `two`'s counts would miss it, and `one`'s would
                    # miss `two`'s if `two` committed first: `two` waits for `one`'s commit instead.
                    late = asyncio.create_task(two.execute(STEP, second))
                    await asyncio.sleep(0.3)
                await late
            await asyncio.sleep(0.3)
            rooms = [m for c, m in got if c == f"bench:team:{team}"]
            assert rooms[-1]["counts"] == await team_counts(pool, team) and rooms[-1]["counts"]["running"] == 2
            assert [m["changes"][0]["id"] for m in rooms] == [first, second]  # in commit order
            panels = [m for c, m in got if c.startswith("bench:trajectory:")]
            assert {m["changes"][0]["id"] for m in panels} == {first, second}
            job = panels[0]["changes"][0]
            assert job["status"] == "running" and job["version"] == 2 and "error" not in job  # the row, no nulls
        finally:
            await listener.close()
            await pool.close()

    asyncio.run(main())


def test_drop_leaves_no_trigger_and_writes_notify_nothing(url: str) -> None:
    async def main() -> None:
        pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
        listener = await asyncpg.connect(url)
        try:
            world = await build_world(pool, teams=1, trajectories_per_team=1, jobs_per_trajectory=3)
            notify_trigger.install(url)
            notify_trigger.install(url)  # installing again replaces it
            assert await pool.fetchval("select count(*) from pg_trigger where tgname = 'bench_notify'") == 1
            notify_trigger.drop(url)
            assert await pool.fetchval("select count(*) from pg_trigger where tgname = 'bench_notify'") == 0
            assert await pool.fetchval("select count(*) from pg_proc where proname = 'bench_notify'") == 0
            got: list[str] = []
            await listener.add_listener(f"bench:team:{world.teams[0]}", lambda *args: got.append(args[3]))
            await pool.execute("update jobs set status = 'running'")
            await asyncio.sleep(0.2)
            assert got == []
        finally:
            await listener.close()
            await pool.close()

    asyncio.run(main())
