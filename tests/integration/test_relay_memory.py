"""A relay's memory does not hold every submission of a team: with room for 5, a team of 40 done submissions leaves
it holding 5 (its /metrics says so), and a task that runs again on one of those it set aside, or a record changed,
still reaches the page with the right figures, on the team channel and in the window, as the real processes run.

A world of its own: a relay with GATEWAY_RELAY_SUBMISSIONS_CACHED=5 and its own /metrics, and one node.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.core.submission_rows import row_digest
from gateway.embedded import EmbeddedValkey, free_port
from harness.follower import Follower
from harness.world import Process, spawn, wait_http
from tests.conftest import create_database, drop_database
from tests.integration.conftest import Team, make_team

CACHED = 5
SUBMISSIONS = 40


class Small:
    def __init__(self, database_url: str, secret: str, relay_metrics: str, node: Process) -> None:
        self.database_url, self.secret, self.relay_metrics, self.node = database_url, secret, relay_metrics, node


@pytest.fixture(scope="module")
def small(pg_admin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Small]:
    database_url = create_database(pg_admin)
    valkey = EmbeddedValkey(tmp_path_factory.mktemp("valkey-small"))
    valkey.start()
    logdir = tmp_path_factory.mktemp("small-logs")
    secret = secrets.token_urlsafe(32)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": f"redis://127.0.0.1:{valkey.port}/0",
        "GATEWAY_SECRET": secret,
        "GATEWAY_RELAY_SUBMISSIONS_CACHED": str(CACHED),
    }
    metrics_port = free_port()
    relay = spawn("small-relay", ["relay"], {**env, "GATEWAY_RELAY_METRICS_PORT": str(metrics_port)}, logdir)
    port = free_port()
    node = spawn("small-node", ["serve", "--port", str(port)], env, logdir, port)
    try:
        wait_http(node)
        yield Small(database_url, secret, f"http://127.0.0.1:{metrics_port}/metrics", node)
    finally:
        node.stop()
        relay.stop()
        valkey.stop()
        drop_database(pg_admin, database_url)


@pytest.fixture
async def spool(small: Small) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(small.database_url, min_size=1, max_size=4)
    yield pool
    await pool.close()


async def until(check: Callable[[], Awaitable[bool]], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"{what} within {timeout:g} s"
        await asyncio.sleep(0.2)


async def relay_figure(small: Small, name: str) -> float | None:
    async with httpx.AsyncClient(timeout=10) as client:
        response = await client.get(small.relay_metrics)
    for line in response.text.splitlines():
        if line.startswith(f"{name}{{"):
            return float(line.rsplit(" ", 1)[1])
    return None


async def rows(small: Small, team: Team) -> dict[int, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=small.node.http, timeout=30) as client:
        response = await client.get(
            f"/api/teams/{team.id}/submissions",
            params={"sort": "id", "dir": "asc", "limit": 500},
            headers={"Authorization": f"Bearer {team.token}"},
        )
    assert response.status_code == 200, response.text
    return {r["id"]: r for r in response.json()["rows"]}


async def test_the_relay_holds_its_cache_not_every_submission_and_one_set_aside_still_goes_out_right(
    small: Small, spool: asyncpg.Pool
) -> None:
    team = await make_team(spool, small.secret)
    ids = [
        r["id"]
        for r in await spool.fetch(
            "insert into submissions (team_id, user_id, project, title)"
            " select $1, $2, 'p', 'Render shot ' || i || ' é' from generate_series(1, $3) i returning id",
            team.id,
            team.user_id,
            SUBMISSIONS,
        )
    ]
    # Two tasks each, done in 10 and 20 seconds: an average frame of 15 s.
    await spool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status,"
        "                  started_at, finished_at)"
        " select $1, $2, $3, 'analysis', 'Analysis frame', k, s, 'completed',"
        "        now() - make_interval(secs => 10 * (k + 1)), now()"
        " from unnest($4::bigint[]) s, generate_series(0, 1) k",
        team.id,
        team.trajectory_id,
        team.cluster_id,
        ids,
    )

    async def all_done() -> bool:
        found = await rows(small, team)
        return len(found) == SUBMISSIONS and all(r["status"] == "success" for r in found.values())

    await until(all_done, "every submission saved, done", 120)
    before = (await rows(small, team))[ids[0]]
    assert before["avg_frame"] == 15.0 and before["tasks"] == 2
    # A start compares what it derives with the saved rows' digests, PostgreSQL's md5() of the text: the same
    # bytes as the relay's JSON, accents and all, so an unchanged row is not sent again.
    saved = await spool.fetch(
        "select row, decode(md5(row), 'hex') as digest from submission_rows where team_id = $1", team.id
    )
    assert len(saved) == SUBMISSIONS and all(row_digest(r["row"].encode()) == r["digest"] for r in saved)

    async def bounded() -> bool:
        held = await relay_figure(small, "gateway_relay_submissions_in_memory")
        return held is not None and held <= CACHED

    await until(bounded, f"the relay holding at most {CACHED} submissions", 60)

    async with Follower(small.node.ws, team.token) as follower:
        await follower.subscribe(f"team:{team.id}")
        # The first submission's 10-second task runs again; the second submission is renamed.
        await spool.execute("update jobs set status = 'running' where submission_id = $1 and frame = 0", ids[0])
        await spool.execute("update submissions set title = 'Render shot 2, renamed' where id = $1", ids[1])

        def sent(submission_id: int) -> dict[str, Any] | None:
            found = [r for m in follower.messages for r in m.get("submissions") or () if r["id"] == submission_id]
            return found[-1] if found else None

        await follower.wait_for(lambda f: sent(ids[0]) is not None and sent(ids[1]) is not None, timeout=60)
    first, second = sent(ids[0]), sent(ids[1])
    assert first is not None and second is not None
    assert first["status"] == "running" and first["tasks"] == 2 and first["title"] == "Render shot 1 é"
    assert first["counts"]["running"] == 1 and first["counts"]["completed"] == 1
    assert first["avg_frame"] == 15.0  # every completion so far, as before it was set aside
    assert second["title"] == "Render shot 2, renamed" and second["status"] == "success"
    assert second["tasks"] == 2 and second["avg_frame"] == 15.0
    window = await rows(small, team)
    assert window[ids[0]]["status"] == "running" and window[ids[1]]["title"] == "Render shot 2, renamed"
    restored = await relay_figure(small, "gateway_relay_submissions_restored")
    assert restored is not None and restored >= 2
