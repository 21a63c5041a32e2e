"""A team past the exact count: the Submissions page's total is counted to 100,000 and estimated past it, and the
answer says which, so the page says an estimate as one ("about 100,000") and a count exactly."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import httpx

from gateway.store.submission_rows import EXACT_TO
from tests.conftest import Stack
from tests.integration.conftest import Team

N = EXACT_TO + 400  # just past the exact count; every other one in project p0


async def window(stack: Stack, team: Team, **params: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, timeout=30) as client:
        response = await client.get(
            f"/api/teams/{team.id}/submissions", params=params, headers={"Authorization": f"Bearer {team.token}"}
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_total_is_exact_to_the_cap_and_an_estimate_said_as_one_past_it(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    await pool.execute(
        "insert into submissions (team_id, user_id, project, title, priority)"
        " select $1, $2, 'p' || (i % 2), 'Render shot ' || i, i % 50 from generate_series(1, $3) i",
        team.id,
        team.user_id,
        N,
    )
    # The relay saves every row; until then a window counts those saved so far (exactly, below the cap).
    deadline = time.monotonic() + 300
    while (await pool.fetchval("select count(*) from submission_rows where team_id = $1", team.id)) < N:
        assert time.monotonic() < deadline, f"the relay did not save {N:,} rows within 300 s"
        await asyncio.sleep(0.5)
    await pool.execute("analyze submission_rows")  # the estimate is the planner's: as autovacuum would leave it

    whole = await window(stack, team, limit=100)
    assert whole["total_exact"] is False
    assert EXACT_TO < whole["total"] and abs(whole["total"] - N) <= N * 0.2, whole["total"]
    assert len(whole["rows"]) == 100  # the page itself is whole

    half = await window(stack, team, project="p0", limit=1)
    assert half["total_exact"] is True and half["total"] == N // 2

    searched = await window(stack, team, q="Render shot 1234", limit=100)  # 1234 and 12340..12349
    assert searched["total_exact"] is True and searched["total"] == 1 + 10
