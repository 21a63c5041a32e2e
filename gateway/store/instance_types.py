"""Instance types in PostgreSQL: the render nodes each cluster declares, and which clusters hold which
submissions (what Edit / Instance Type may offer)."""

from __future__ import annotations

from typing import NamedTuple

import asyncpg

from ..core.instance_types import InstanceType


class Holder(NamedTuple):
    """A submission and a cluster that holds it: its own, or one running its tasks."""

    submission_id: int
    cluster_id: int


async def replace(pool: asyncpg.Pool, cluster_id: int, types: list[InstanceType]) -> None:
    """The cluster's list becomes `types`, in one transaction."""
    async with pool.acquire() as db, db.transaction():
        await db.execute("delete from instance_types where cluster_id = $1", cluster_id)
        await db.executemany(
            "insert into instance_types (cluster_id, name, cores, memory_gb, preemptible) values ($1, $2, $3, $4, $5)",
            [(cluster_id, t.name, t.cores, t.memory_gb, t.preemptible) for t in types],
        )


async def teams_of_submissions(pool: asyncpg.Pool, ids: list[int], user_id: int) -> dict[int, int]:
    """The team of each of the submissions that is of a team the user is a member of (the others are left out)."""
    rows = await pool.fetch(
        "select s.id, s.team_id from submissions s join memberships m on m.team_id = s.team_id and m.user_id = $2"
        " where s.id = any($1::bigint[])",
        ids,
        user_id,
    )
    return {r["id"]: r["team_id"] for r in rows}


async def holders(pool: asyncpg.Pool, team_id: int, submissions: list[int]) -> list[Holder]:
    """The clusters holding the team's submissions: each submission's own cluster, else the clusters of its tasks
    (a submission neither names is left out)."""
    rows = await pool.fetch(
        "select s.id, s.cluster_id from submissions s where s.id = any($1::bigint[]) and s.team_id = $2"
        " and s.cluster_id is not null"
        " union select distinct j.submission_id, j.cluster_id from jobs j join submissions s on s.id = j.submission_id"
        " where s.id = any($1::bigint[]) and s.team_id = $2 and s.cluster_id is null and j.team_id = $2",
        submissions,
        team_id,
    )
    return [Holder(*r) for r in rows]


async def team_types(pool: asyncpg.Pool, team_id: int) -> list[tuple[int, InstanceType]]:
    """Every type the team's clusters offer, with the cluster offering it, smallest first."""
    rows = await pool.fetch(
        "select t.cluster_id, t.name, t.cores, t.memory_gb, t.preemptible from instance_types t"
        " join clusters c on c.id = t.cluster_id where c.team_id = $1 order by t.cores, t.memory_gb, t.name",
        team_id,
    )
    return [
        (
            r["cluster_id"],
            InstanceType(name=r["name"], cores=r["cores"], memory_gb=r["memory_gb"], preemptible=r["preemptible"]),
        )
        for r in rows
    ]
