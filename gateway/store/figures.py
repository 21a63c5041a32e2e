"""The SQL behind the figures a process reports: readiness, and the team sizes beside presence."""

from __future__ import annotations

import asyncpg


async def ping(pool: asyncpg.Pool) -> None:
    """Raise unless PostgreSQL answers (a node's readiness)."""
    await pool.fetchval("select 1")


async def member_counts(db: asyncpg.Connection, team_ids: list[int]) -> dict[int, int]:
    """How many members each of these teams has (teams without any are left out)."""
    rows = await db.fetch(
        "select team_id, count(*) as n from memberships where team_id = any($1::bigint[]) group by team_id", team_ids
    )
    return {r["team_id"]: r["n"] for r in rows}
