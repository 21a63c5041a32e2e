"""The demo's data in PostgreSQL: the demo team's inserts, and what an earlier run left for the clusters.

Each function runs on the seed's one connection, inside its transaction (gateway.seed).
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg


@dataclass(frozen=True)
class Unfinished:
    """A job of the last run: one a cluster still had when it stopped (queued, retrying, running or held), or one
    it had finished (completed, failed or preempted), which a retry may bring back."""

    id: int
    cluster_id: int
    kind: str
    attempts: int
    status: str
    priority: int


async def demo_team(db: asyncpg.Connection) -> int | None:
    return await db.fetchval("select id from teams where name = 'Demo Lab'")


async def create_demo_teams(
    db: asyncpg.Connection, members: list[str], clusters: list[str], trajectories: list[str]
) -> int:
    """The demo team with its members (the first its owner, the second an admin), clusters and trajectories, and
    another team with one member (someone the demo team's data must stay hidden from); returns the demo team's id."""
    team_id: int = await db.fetchval("insert into teams (name) values ('Demo Lab') returning id")
    for i, name in enumerate(members):
        uid = await db.fetchval("insert into users (name) values ($1) returning id", name)
        role = ("owner", "admin")[i] if i < 2 else "member"
        await db.execute("insert into memberships (team_id, user_id, role) values ($1, $2, $3)", team_id, uid, role)
    for name in clusters:
        await db.execute("insert into clusters (team_id, name) values ($1, $2)", team_id, name)
    for name in trajectories:
        await db.execute("insert into trajectories (team_id, name) values ($1, $2)", team_id, name)
    other = await db.fetchval("insert into teams (name) values ('Other Lab') returning id")
    ouid = await db.fetchval("insert into users (name) values ('Outsider') returning id")
    await db.execute("insert into memberships values ($1, $2)", other, ouid)
    return team_id


async def member_ids(db: asyncpg.Connection, team_id: int) -> list[int]:
    rows = await db.fetch("select user_id from memberships where team_id = $1 order by user_id", team_id)
    return [r["user_id"] for r in rows]


async def cluster_ids(db: asyncpg.Connection, team_id: int) -> list[int]:
    return [r["id"] for r in await db.fetch("select id from clusters where team_id = $1 order by id", team_id)]


async def empty_trajectories(db: asyncpg.Connection, team_id: int) -> list[int]:
    """The team's trajectories with nothing uploaded yet (no listed jobs)."""
    rows = await db.fetch(
        "select id from trajectories t where team_id = $1"
        " and not exists (select 1 from jobs j where j.trajectory_id = t.id and j.removed_at is null) order by id",
        team_id,
    )
    return [r["id"] for r in rows]


async def other_team(db: asyncpg.Connection) -> tuple[int, int]:
    """The other team's id and its member's."""
    team_id: int = await db.fetchval("select id from teams where name = 'Other Lab'")
    user_id: int = await db.fetchval("select user_id from memberships where team_id = $1 limit 1", team_id)
    return team_id, user_id


async def unfinished(db: asyncpg.Connection, team_id: int) -> list[Unfinished]:
    """The team's listed jobs not finished, with their submission's priority (0 without one)."""
    rows = await db.fetch(
        "select j.id, j.cluster_id, j.kind, j.attempts, j.status, coalesce(s.priority, 0) as priority"
        " from jobs j left join submissions s on s.id = j.submission_id"
        " where j.team_id = $1 and j.removed_at is null and j.status in ('queued', 'retrying', 'running', 'holding')"
        " order by j.id",
        team_id,
    )
    return [Unfinished(**r) for r in rows]


async def finished(db: asyncpg.Connection, team_id: int) -> list[Unfinished]:
    """The team's listed jobs that finished (completed, failed or preempted), oldest first: a restarted cluster
    keeps them as it keeps its own, so Retry Failed Jobs runs a failure of the last run again."""
    rows = await db.fetch(
        "select j.id, j.cluster_id, j.kind, j.attempts, j.status, coalesce(s.priority, 0) as priority"
        " from jobs j left join submissions s on s.id = j.submission_id"
        " where j.team_id = $1 and j.removed_at is null and j.status in ('completed', 'failed', 'preempted')"
        " order by j.id",
        team_id,
    )
    return [Unfinished(**r) for r in rows]


async def staging(db: asyncpg.Connection, team_id: int) -> dict[int, tuple[str, int | None]]:
    """The team's submissions not yet ready: their staging state and the cluster staging them (None: any)."""
    rows = await db.fetch(
        "select id, staging, cluster_id from submissions where team_id = $1 and staging <> 'ready' order by id",
        team_id,
    )
    return {r["id"]: (r["staging"], r["cluster_id"]) for r in rows}
