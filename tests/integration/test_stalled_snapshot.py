"""A client that stops reading in the middle of its snapshot (bigger than the socket buffers) for at most twelve
seconds (well within the keepalive's interval, so it is not taken for dead, however slow the machine): the channel's
live frames, held back until the snapshot is out, must not pile up on the node without bound. Past the connection's
bound they are dropped, and once the client reads again it gets them from the channel's history after its snapshot:
it ends at the database's state, not resynced."""

from __future__ import annotations

import asyncio

import asyncpg

from bench.procstat import rss_kb
from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs

MAX_PENDING_MB = 2  # the stack's GATEWAY_MAX_PENDING_BYTES
# The node closes a client that reads nothing between two keepalive pings (GATEWAY_KEEPALIVE, 20 s), so the stall
# ends by the clock, well within that, on a busy machine too (counted in changes, it once took 26 s).
STALL = 12.0
CHANGE_KB = 250  # about what one update of 1,000 jobs sends on the trajectory channel


async def test_a_client_stalled_mid_snapshot_is_bounded_then_caught_up_from_history(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    ids = await insert_jobs(pool, team, 30_000)  # a snapshot of about 9 MB: more than the kernel holds
    channel = f"trajectory:{team.trajectory_id}"
    node = stack.nodes[0]
    f = Follower(node.ws, team.token, stallable=True)
    await f.__aenter__()
    try:
        loop = asyncio.get_running_loop()
        f.stall()
        stalled_at = loop.time()
        await f.subscribe(channel)
        await asyncio.sleep(1.0)  # the snapshot's first pages fill the socket; the rest waits for it to drain
        before = rss_kb([node.proc.pid])
        grown = changes = 0
        # Live changes while it waits, MBs a second: past its bound, yet within the channel's history (the test
        # stack keeps 64 MiB of it), so what it missed is still there (past it the answer is a snapshot).
        while changes < 50 and loop.time() - stalled_at < STALL - 1:
            await pool.execute(
                "update jobs set status = $2 where id = any($1::bigint[])",
                ids[:1000],
                ("running", "queued")[changes % 2],
            )
            changes += 1
            await asyncio.sleep(0.05)
            grown = max(grown, rss_kb([node.proc.pid]) - before)
        # Only live changes well past the bound make the RSS check mean something.
        assert changes * CHANGE_KB > 2 * MAX_PENDING_MB * 1024, f"only {changes} changes in {STALL} s: too slow to test"
        assert grown < (2 * MAX_PENDING_MB + 16) * 1024, f"node RSS grew {grown / 1024:.0f} MiB"
        f.wake()  # it reads the rest of its snapshot, then what was dropped meanwhile from history, then live
        jobs = {
            r["id"]: (r["status"], r["version"])
            for r in await pool.fetch(
                "select id, status, version from jobs where trajectory_id = $1 and removed_at is null",
                team.trajectory_id,
            )
        }
        await f.wait_for(
            lambda f: {i: (j["status"], j["version"]) for i, j in f.listed(channel).items()} == jobs, timeout=60
        )
        assert f.channels[channel].resyncs == 0 and f.problems == [], [m for m in f.messages if m["type"] == "resync"]
    finally:
        await f.__aexit__()
