"""A page of the dashboard's cards reads only its own trajectories' summaries from the team channel's stored state,
never the team's whole state: with many trajectories stored, a page carries exactly the summaries of the cards it
lists, and another trajectory's stored summary (here one no reader could decode) plays no part in it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import httpx
from redis.asyncio import Redis

from gateway.bus import keys
from gateway.core import channels
from gateway.core.batching import SUMMARY_STATE_PREFIX
from tests.conftest import Stack
from tests.integration.conftest import Team

TRAJECTORIES = 300  # each with a job, so the team channel lists every one


async def cards(stack: Stack, team: Team, **params: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, timeout=30) as client:
        response = await client.get(
            f"/api/teams/{team.id}/trajectories", params=params, headers={"Authorization": f"Bearer {team.token}"}
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_page_of_cards_reads_only_the_trajectories_it_lists(
    stack: Stack, pool: asyncpg.Pool, team: Team, redis_url: str
) -> None:
    ids = [
        r["id"]
        for r in await pool.fetch(
            "insert into trajectories (team_id, name) select $1, 'Run ' || lpad(i::text, 4, '0')"
            " from generate_series(1, $2) i returning id",
            team.id,
            TRAJECTORIES,
        )
    ]
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame)"
        " select $1, t, $2, 'preprocess', 'Preprocess trajectory frame', 0 from unnest($3::bigint[]) t",
        team.id,
        team.cluster_id,
        ids,
    )
    redis = Redis.from_url(redis_url)
    try:
        key = await _state_key(redis, team.id)
        deadline = time.monotonic() + 60
        prefix = SUMMARY_STATE_PREFIX.encode()
        while sum(f.startswith(prefix) for f in await redis.hkeys(key)) < TRAJECTORIES:  # every summary stored
            assert time.monotonic() < deadline, "the relay did not store every summary within 60 s"
            await asyncio.sleep(0.1)
        # A summary stored for a trajectory this page does not list, which no reader could decode.
        await redis.hset(key, f"{SUMMARY_STATE_PREFIX}{ids[0]}", b"\xc1 not a summary")

        newest = await cards(stack, team, limit=10)
        listed = [t["id"] for t in newest["trajectories"]]
        assert newest["total"] == TRAJECTORIES + 1  # and the team's own trajectory
        assert len(listed) == 10 and ids[0] not in listed
        assert sorted(s["id"] for s in newest["summaries"]) == sorted(listed)  # each card's, none other

        searched = await cards(stack, team, q="Run 0150")
        assert [s["id"] for s in searched["summaries"]] == [ids[149]]
    finally:
        await redis.aclose()


async def _state_key(redis: Redis, team_id: int) -> str:
    """The team channel's stored state, under whichever partition's tag the stack gave its team."""
    suffix = f":state:{channels.team(team_id)}"
    deadline = time.monotonic() + 60
    while True:
        found = [k.decode() async for k in redis.scan_iter(match=f"{keys.PREFIX}*{suffix}")]
        if found:
            return found[0]
        assert time.monotonic() < deadline, "the relay stored no state for the team within 60 s"
        await asyncio.sleep(0.1)
