"""A client that stops reading in the middle of its snapshot (bigger than the socket buffers) while its
library still answers pings: the channel's live frames, held back until the snapshot is out, must not pile
up on the node without bound. Past the connection's bound it should be resynced, as any slow consumer.
Not so yet (xfail): see the reason."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from bench.procstat import rss_kb
from tests.conftest import Stack
from tests.follower import Follower
from tests.integration.conftest import Team, insert_jobs

MAX_PENDING_MB = 2  # the stack's GATEWAY_MAX_PENDING_BYTES


@pytest.mark.xfail(strict=True, reason=(
    "live frames held back for a snapshot (Connection.buffering) are not bounded, and the snapshot "
    "(node.py _send_jobs_snapshot) waits for the client to drain with no deadline: the node's RSS grows ~5 MiB/s. "
    "Counting them against the pending bound alone resyncs a fast client reading a big snapshot during a burst "
    "(test_websocket.py::test_big_trajectory_snapshot_is_paged_and_never_trips_the_slow_consumer_bound)"))
async def test_a_client_stalled_mid_snapshot_is_resynced_not_buffered_without_bound(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    ids = await insert_jobs(pool, team, 30_000)  # a snapshot of about 9 MB: more than the kernel holds
    channel = f"trajectory:{team.trajectory_id}"
    node = stack.nodes[0]
    f = Follower(node.ws, team.token, stallable=True)
    await f.__aenter__()
    try:
        f.stall()
        await f.subscribe(channel)
        await asyncio.sleep(1.0)  # the snapshot's first pages fill the socket; the rest waits for it to drain
        before = rss_kb([node.proc.pid])
        grown = 0
        for i in range(50):  # live changes on the channel while it waits: about 5 MB a second
            await pool.execute("update jobs set status = $2 where id = any($1::bigint[])", ids[:1000], ("running", "queued")[i % 2])
            await f.send_pong()  # alive, just not reading
            await asyncio.sleep(0.2)
            grown = max(grown, rss_kb([node.proc.pid]) - before)
        assert grown < (2 * MAX_PENDING_MB + 16) * 1024, f"node RSS grew {grown / 1024:.0f} MiB"
        f.wake()  # it reads what waited, then `resync`: it subscribes again and gets the whole state
        jobs = {r["id"]: (r["status"], r["version"]) for r in await pool.fetch(
            "select id, status, version from jobs where trajectory_id = $1 and removed_at is null", team.trajectory_id)}  # fmt: skip
        await f.wait_for(lambda f: {i: (j["status"], j["version"]) for i, j in f.listed(channel).items()} == jobs, timeout=60)
        assert f.channels[channel].resyncs == 1 and f.problems == []
    finally:
        await f.__aexit__()
