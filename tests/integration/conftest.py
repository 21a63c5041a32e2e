"""Per-test data: a fresh team with a member, a cluster with its key, and a trajectory."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import asyncpg
import pytest
from redis.asyncio import Redis

from harness.follower import Follower
from harness.teams import Team, make_team  # noqa: F401  (tests import them from here too)
from tests.conftest import Process, Stack


@pytest.fixture
async def scratch_redis(redis_url: str) -> AsyncIterator[Redis]:
    """A client on Redis database 1, which no stack beside the tests reads; emptied after the test."""
    client = Redis.from_url(redis_url.rsplit("/", 1)[0] + "/1")
    try:
        yield client
    finally:
        await client.flushdb()
        await client.aclose()


@pytest.fixture(scope="session")
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(database_url, min_size=1, max_size=12)
    yield pool
    await pool.close()


@pytest.fixture
async def team(pool: asyncpg.Pool, stack: Stack) -> Team:
    return await make_team(pool, stack.secret)


async def insert_jobs(pool: asyncpg.Pool, team: Team, n: int, trajectory_id: int | None = None) -> list[int]:
    """Plain SQL, naming only the spine's columns, as the platform's own writers do."""
    rows = await pool.fetch(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame)"
        " select $1, $2, $3, 'preprocess', 'Preprocess trajectory frame', f from generate_series(0, $4 - 1) f"
        " returning id",
        team.id,
        trajectory_id or team.trajectory_id,
        team.cluster_id,
        n,
    )
    return [r["id"] for r in rows]


async def follow_each_team(nodes: Sequence[Process], teams: list[Team], timeout: float = 30.0) -> list[Follower]:
    """A follower per team on each node, on the team's three channels, each past its snapshot."""
    followers = []
    for node in nodes:
        for team in teams:
            f = Follower(node.ws, team.token)
            await f.__aenter__()
            for channel in (f"trajectory:{team.trajectory_id}", f"team-jobs:{team.id}", f"team:{team.id}"):
                await f.subscribe(channel)
            followers.append(f)
    for f in followers:
        await f.wait_for(lambda f: all(s.snapshot_done for s in f.channels.values()), timeout=timeout)
    return followers
