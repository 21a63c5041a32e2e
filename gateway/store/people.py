"""Users, their teams and the teams' trajectories in PostgreSQL: what the web API shows about who is who."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import asyncpg


class Named(NamedTuple):
    """A user or a team."""

    id: int
    name: str


class Listed(NamedTuple):
    """A trajectory as the dashboard lists it."""

    id: int
    name: str
    created_at: datetime


async def user(pool: asyncpg.Pool, user_id: int) -> Named | None:
    row = await pool.fetchrow("select id, name from users where id = $1", user_id)
    return None if row is None else Named(*row)


async def user_name(pool: asyncpg.Pool, user_id: int) -> str | None:
    return await pool.fetchval("select name from users where id = $1", user_id)


async def users(pool: asyncpg.Pool) -> list[Named]:
    """Every user, by id (the demo's user picker)."""
    return [Named(*r) for r in await pool.fetch("select id, name from users order by id")]


async def teams_of(pool: asyncpg.Pool, user_id: int) -> list[Named]:
    """The user's teams, by name."""
    rows = await pool.fetch(
        "select t.id, t.name from teams t join memberships m on m.team_id = t.id where m.user_id = $1 order by t.name",
        user_id,
    )
    return [Named(*r) for r in rows]


async def members(pool: asyncpg.Pool, team_id: int) -> list[Named]:
    """The team's members, by name."""
    rows = await pool.fetch(
        "select u.id, u.name from users u join memberships m on m.user_id = u.id where m.team_id = $1 order by u.name",
        team_id,
    )
    return [Named(*r) for r in rows]


async def trajectories(pool: asyncpg.Pool, team_id: int) -> list[Listed]:
    """The team's trajectories, newest first (at most 500)."""
    rows = await pool.fetch(
        "select id, name, created_at from trajectories where team_id = $1 order by created_at desc, id desc limit 500",
        team_id,
    )
    return [Listed(*r) for r in rows]
