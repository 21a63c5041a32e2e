"""Demo data: a team with members, clusters and trajectories, and the keys to act as its clusters."""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg

from .web.auth import new_cluster_key

MEMBERS = ["Ada Lovelace", "Rosalind Franklin", "Linus Pauling", "Dorothy Hodgkin", "Max Perutz"]
TRAJECTORIES = ["Lipid bilayer 310K", "Ubiquitin folding", "KcsA ion channel", "Water box NPT", "Lysozyme in salt"]
CLUSTERS = ["gpu-1", "gpu-2", "cpu-big"]


@dataclass(frozen=True)
class Unfinished:
    """A job a cluster still had when the last run stopped: queued, retrying, running or held."""

    id: int
    cluster_id: int
    kind: str
    attempts: int
    status: str
    priority: int


@dataclass
class Seeded:
    team_id: int
    user_ids: list[int]
    cluster_ids: list[int]
    cluster_keys: dict[int, str] = field(default_factory=dict)
    trajectory_ids: list[int] = field(default_factory=list)
    other_team_id: int = 0
    other_user_id: int = 0
    # What the last run left half-way, for the clusters to take up again (else it would look stuck for good).
    unfinished: list[Unfinished] = field(default_factory=list)
    staging: dict[int, str] = field(default_factory=dict)  # submission id -> staging state short of ready


async def seed_demo(dsn: str) -> Seeded:
    """Create the demo team once; later runs find it and hand out fresh cluster keys."""
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            team_id = await conn.fetchval("select id from teams where name = 'Demo Lab'")
            if team_id is None:
                team_id = await conn.fetchval("insert into teams (name) values ('Demo Lab') returning id")
                for name in MEMBERS:
                    uid = await conn.fetchval("insert into users (name) values ($1) returning id", name)
                    await conn.execute("insert into memberships values ($1, $2)", team_id, uid)
                for name in CLUSTERS:
                    await conn.execute("insert into clusters (team_id, name) values ($1, $2)", team_id, name)
                for name in TRAJECTORIES:
                    await conn.execute("insert into trajectories (team_id, name) values ($1, $2)", team_id, name)
                other = await conn.fetchval("insert into teams (name) values ('Other Lab') returning id")
                ouid = await conn.fetchval("insert into users (name) values ('Outsider') returning id")
                await conn.execute("insert into memberships values ($1, $2)", other, ouid)
            users = [
                r["user_id"]
                for r in await conn.fetch(
                    "select user_id from memberships where team_id = $1 order by user_id", team_id
                )
            ]
            clusters = [
                r["id"] for r in await conn.fetch("select id from clusters where team_id = $1 order by id", team_id)
            ]
            trajectories = [
                r["id"]
                for r in await conn.fetch(  # the ones with nothing uploaded yet
                    "select id from trajectories t where team_id = $1"
                    " and not exists (select 1 from jobs j where j.trajectory_id = t.id and j.removed_at is null) order by id",
                    team_id,
                )
            ]
            other_team = await conn.fetchval("select id from teams where name = 'Other Lab'")
            other_user = await conn.fetchval("select user_id from memberships where team_id = $1 limit 1", other_team)
            seeded = Seeded(
                team_id,
                users,
                clusters,
                trajectory_ids=trajectories,
                other_team_id=other_team,
                other_user_id=other_user,
            )
            for cid in clusters:
                key, key_hash = new_cluster_key(cid)
                await conn.execute("update clusters set key_hash = $2 where id = $1", cid, key_hash)
                seeded.cluster_keys[cid] = key
            seeded.unfinished = [
                Unfinished(**r)
                for r in await conn.fetch(
                    "select j.id, j.cluster_id, j.kind, j.attempts, j.status, coalesce(s.priority, 0) as priority"
                    " from jobs j left join submissions s on s.id = j.submission_id"
                    " where j.team_id = $1 and j.removed_at is null and j.status in ('queued', 'retrying', 'running', 'holding')"
                    " order by j.id",
                    team_id,
                )
            ]
            seeded.staging = dict(
                await conn.fetch(
                    "select id, staging from submissions where team_id = $1 and staging <> 'ready' order by id", team_id
                )
            )
            return seeded
    finally:
        await conn.close()
