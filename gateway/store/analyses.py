"""Analyses in PostgreSQL: a trajectory's listing with its frames' progress, and deleting one with its results."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import asyncpg


class AnalysisProgress(NamedTuple):
    """An analysis and how many of its frames (its `analysis` jobs still listed) are where."""

    id: int
    plugin: str
    created_at: datetime
    frames: int
    completed: int
    failed: int  # failed or preempted
    running: int
    queued: int  # queued, retrying or held
    silent: int  # queued, retrying or running on a cluster that stopped reporting (core.status.SILENT)
    holding: int  # of `queued`: waiting for a person (the panel's time left says why it is unknown)
    clusters: list[str]  # the clusters its unfinished jobs are on (Delete analysis stops them there), by name


class FoundAnalysis(NamedTuple):
    plugin: str
    deleted: bool


_LISTING = """
select a.id, a.plugin, a.created_at,
       count(j.id) filter (where j.kind = 'analysis') as frames,
       count(j.id) filter (where j.kind = 'analysis' and j.status = 'completed') as completed,
       count(j.id) filter (where j.kind = 'analysis' and j.status in ('failed', 'preempted')) as failed,
       count(j.id) filter (where j.kind = 'analysis' and j.listed = 'running') as running,
       count(j.id) filter (where j.kind = 'analysis' and j.listed in ('queued', 'retrying', 'holding')) as queued,
       count(j.id) filter (where j.kind = 'analysis' and j.listed = 'silent') as silent,
       count(j.id) filter (where j.kind = 'analysis' and j.listed = 'holding') as holding,
       coalesce(array_agg(distinct c.name order by c.name)
                filter (where j.status in ('queued', 'retrying', 'running', 'holding')), '{}') as clusters
from analyses a
left join (select id, analysis_id, trajectory_id, cluster_id, kind, status,
                  job_listed_status(status, silent_since) as listed
           from jobs where removed_at is null) j on j.analysis_id = a.id and j.trajectory_id = a.trajectory_id
left join clusters c on c.id = j.cluster_id
where a.trajectory_id = $1 and a.deleted_at is null
group by a.id
order by a.created_at desc, a.id desc
limit $2
"""


async def listing(pool: asyncpg.Pool, trajectory_id: int, limit: int) -> list[AnalysisProgress]:
    """The trajectory's analyses not deleted, newest first."""
    rows = await pool.fetch(_LISTING, trajectory_id, limit)
    return [AnalysisProgress(**{**dict(r), "clusters": list(r["clusters"])}) for r in rows]


async def find(pool: asyncpg.Pool, analysis_id: int) -> FoundAnalysis | None:
    row = await pool.fetchrow("select plugin, deleted_at from analyses where id = $1", analysis_id)
    return None if row is None else FoundAnalysis(row["plugin"], row["deleted_at"] is not None)


async def count_jobs(pool: asyncpg.Pool, analysis_id: int, team_id: int, statuses: list[str]) -> int:
    """How many of the team's listed jobs of the analysis (of any kind) are in `statuses`."""
    count: int = await pool.fetchval(
        "select count(*) from jobs where analysis_id = $1 and team_id = $2 and removed_at is null"
        " and status = any($3::text[])",
        analysis_id,
        team_id,
        statuses,
    )
    return count


async def delete(pool: asyncpg.Pool, analysis_id: int, team_id: int) -> int:
    """Mark the analysis deleted and tombstone its results (its jobs, through the captured path), in one
    transaction; returns how many results were deleted."""
    async with pool.acquire() as db, db.transaction():
        await db.execute("update analyses set deleted_at = now() where id = $1 and deleted_at is null", analysis_id)
        removed = await db.execute(
            "update jobs set removed_at = now() where analysis_id = $1 and team_id = $2 and removed_at is null",
            analysis_id,
            team_id,
        )
    return int(removed.split()[-1])
