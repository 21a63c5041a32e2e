"""Users, their teams and the teams' trajectories in PostgreSQL: what the web API shows about who is who."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple, cast

import asyncpg

from ..core.preferences import Finishes
from ..core.submission_window import like_pattern
from .reads import bounded

__all__ = ["Finishes"]  # which finishes reach a person (users.finishes), named where the announcement is


class Named(NamedTuple):
    """A user or a team."""

    id: int
    name: str


class Listed(NamedTuple):
    """A trajectory as the dashboard lists it."""

    id: int
    name: str
    created_at: datetime
    staging: str | None = None  # its newest upload's data, while not on the cluster yet


async def user(pool: asyncpg.Pool, user_id: int) -> Named | None:
    row = await pool.fetchrow("select id, name from users where id = $1", user_id)
    return None if row is None else Named(*row)


async def user_name(pool: asyncpg.Pool, user_id: int) -> str | None:
    return await pool.fetchval("select name from users where id = $1", user_id)


async def finishes(pool: asyncpg.Pool, user_id: int) -> Finishes:
    """Which finishes reach the person: "mine" (their own), "team" or "none" (chosen in Account)."""
    return cast(Finishes, await pool.fetchval("select finishes from users where id = $1", user_id) or "mine")


async def choose_finishes(pool: asyncpg.Pool, user_id: int, choice: Finishes) -> None:
    await pool.execute("update users set finishes = $2 where id = $1", user_id, choice)


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


class Membership(NamedTuple):
    """A team of a user's, and their role in it: owner, admin or member."""

    id: int
    name: str
    role: str


async def memberships_of(pool: asyncpg.Pool, user_id: int) -> list[Membership]:
    """The user's teams with their role in each, by name."""
    rows = await pool.fetch(
        "select t.id, t.name, m.role from teams t join memberships m on m.team_id = t.id where m.user_id = $1"
        " order by t.name, t.id",
        user_id,
    )
    return [Membership(*r) for r in rows]


async def members(pool: asyncpg.Pool, team_id: int) -> list[Named]:
    """The team's members, by name."""
    rows = await pool.fetch(
        "select u.id, u.name from users u join memberships m on m.user_id = u.id where m.team_id = $1 order by u.name",
        team_id,
    )
    return [Named(*r) for r in rows]


async def roles(pool: asyncpg.Pool, team_id: int) -> dict[int, str]:
    """Each member's role in the team, by user id."""
    rows = await pool.fetch("select user_id, role from memberships where team_id = $1", team_id)
    return {r["user_id"]: r["role"] for r in rows}


async def trajectories(
    pool: asyncpg.Pool, team_id: int, search: str = "", offset: int = 0, limit: int = 100, timeout: float = 0
) -> tuple[int, list[Listed]]:
    """How many of the team's trajectories match `search` (a part of the name), and a page of them, newest first,
    each with where its newest upload's data is when it is not on the cluster yet (else None); each statement
    bounded by `timeout` (reads.TooSlow past it)."""
    where = "team_id = $1"
    args: list[object] = [team_id]
    if search:
        where += " and name ilike $2"
        args.append(like_pattern(search))
    async with bounded(pool, timeout, isolation="repeatable_read") as db:
        total: int = await db.fetchval(f"select count(*) from trajectories where {where}", *args)
        rows = await db.fetch(
            # Only the partial index (trajectory_id, created_at) where staging <> 'ready' answers this: a few rows
            # per page, whatever the planner knows (naming the team too let it walk the team's submissions).
            "select t.id, t.name, t.created_at, (select s.staging from submissions s where s.trajectory_id = t.id"
            "  and s.staging <> 'ready' order by s.created_at desc limit 1) as staging"
            f" from trajectories t where {where} order by created_at desc, id desc"
            f" limit {int(limit)} offset {int(offset)}",
            *args,
        )
    return total, [Listed(*r) for r in rows]


async def members_trajectory(pool: asyncpg.Pool, trajectory_id: int, user_id: int) -> Listed | None:
    """A trajectory of one of the user's teams, whatever its age; None for another team's and a missing one alike
    (one statement either way)."""
    row = await pool.fetchrow(
        "select t.id, t.name, t.created_at from trajectories t join memberships m on m.team_id = t.team_id"
        " where t.id = $1 and m.user_id = $2",
        trajectory_id,
        user_id,
    )
    return None if row is None else Listed(row["id"], row["name"], row["created_at"])
