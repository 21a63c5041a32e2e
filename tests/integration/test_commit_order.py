"""Concurrent transactions commit out of sequence order: the relay never skips one that commits late."""

from __future__ import annotations

import asyncio

import asyncpg

from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs


async def test_late_commit_is_not_skipped_and_the_blocker_is_named(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    early, late = await insert_jobs(pool, team, 2)
    channel = f"trajectory:{team.trajectory_id}"
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(channel)
        await f.wait_for(lambda f: len(f.listed(channel)) == 2)

        slow = await pool.acquire()
        tx = slow.transaction()
        await tx.start()
        try:
            # The slow transaction captures its change first (a lower xid and seq) but commits last.
            await slow.execute("update jobs set status = 'running' where id = $1", early)
            blocker_pid = await slow.fetchval("select pg_backend_pid()")
            await pool.execute("update jobs set status = 'completed' where id = $1", late)
            # Held back for over two seconds, the relay names the open transaction that holds it.
            for _ in range(200):
                if f"pid={blocker_pid}" in stack.relay.output():
                    break
                await asyncio.sleep(0.05)
            # Nothing past the open transaction is published yet: publishing it now would let the
            # relay's cursor pass the slow transaction's change before it is visible.
            assert f.listed(channel)[late]["status"] == "queued"
            await tx.commit()
        except BaseException:
            await tx.rollback()
            raise
        finally:
            await pool.release(slow)

        await f.wait_for(
            lambda f: (
                f.listed(channel)[early]["status"] == "running" and f.listed(channel)[late]["status"] == "completed"
            )
        )
        assert f.problems == []
    log = stack.relay.output()
    assert "relay held back" in log and f"pid={blocker_pid}" in log
