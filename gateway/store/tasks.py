"""The jobs an action reaches, and what the clusters confirmed written back: the control path's SQL.

Actions write through the captured path (plain UPDATEs of `jobs`), so everyone watching sees the result live.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import asyncpg

from .activity import CLI

# Which of a team's jobs an action names: a trajectory's, an analysis's (its frames and the upload that stores
# them), or only an analysis's frames.
Scope = Literal["trajectory", "analysis", "analysis_frames"]

_SCOPES: dict[Scope, str] = {
    "trajectory": "j.trajectory_id = $1",
    "analysis": "j.analysis_id = $1",
    "analysis_frames": "j.analysis_id = $1 and j.kind = 'analysis'",
}


class HeldJob(NamedTuple):
    """A job and the cluster that holds it."""

    id: int
    cluster_id: int
    cluster: str  # the cluster's name
    status: str | None = None
    attempts: int = 1  # the attempt it was on when the action read it
    trajectory_id: int = 0  # where its reports arrive (a trajectory's channel)


async def jobs_in_scope(
    pool: asyncpg.Pool, scope: Scope, scope_id: int, team_id: int, statuses: list[str]
) -> list[HeldJob]:
    """The scope's listed jobs in `statuses`: only the team's jobs on its own clusters, whatever else names the
    scope's trajectory or analysis."""
    rows = await pool.fetch(
        f"select j.id, j.cluster_id, c.name, j.status, j.attempts, j.trajectory_id from jobs j join clusters c on c.id = j.cluster_id"
        f" where {_SCOPES[scope]} and j.team_id = $3 and c.team_id = $3 and j.removed_at is null"
        f" and j.status = any($2::text[])",
        scope_id,
        statuses,
        team_id,
    )
    return [HeldJob(*r) for r in rows]


async def tombstone(pool: asyncpg.Pool, ids: list[int], statuses: list[str], by: int | None = None) -> None:
    """Removed jobs are tombstoned, not deleted: a late report cannot bring them back; what they produced is kept.
    Each says who removed it (user `by`, by name; None: the command line): also one its cluster's report of the
    removal reached first, since the cluster confirmed it did so for this action."""
    await pool.execute(
        "update jobs set removed_at = coalesce(removed_at, now()),"
        " removed_by = coalesce((select name from users where id = $3), $4)"
        " where id = any($1::bigint[]) and removed_by is null"
        " and (removed_at is not null or status = any($2::text[]))",
        ids,
        statuses,
        by,
        CLI,
    )


async def retry(pool: asyncpg.Pool, seen: dict[int, int], statuses: list[str], by: int | None = None) -> None:
    """A new attempt of each job, after the attempt it was on when read (`seen`: id -> attempts). The cluster
    reports the same new attempt itself; whichever write lands first, the other is moot. Their submissions say
    their failed tasks were retried, by user `by` (None: the command line), and when."""
    async with pool.acquire() as db, db.transaction():
        await db.execute(
            "update jobs j set status = 'retrying', attempts = r.attempts + 1, error = null"
            " from unnest($1::bigint[], $3::int[]) as r(id, attempts)"
            " where j.id = r.id and j.attempts = r.attempts and j.removed_at is null and j.status = any($2::text[])",
            list(seen),
            statuses,
            list(seen.values()),
        )
        await db.execute(
            "update submissions set acted = 'retry_failed', acted_by = $2, acted_at = now(),"
            " acted_by_name = coalesce((select name from users where id = $2), $3)"
            " where id in (select submission_id from jobs where id = any($1::bigint[]))",
            list(seen),
            by,
            CLI,
        )


async def selected_tasks(
    pool: asyncpg.Pool, team_id: int, statuses: list[str], submissions: list[int], tasks: list[int]
) -> list[HeldJob]:
    """The team's listed tasks in `statuses` on its own clusters, of the selected submissions or selected alone."""
    rows = await pool.fetch(
        "select j.id, j.cluster_id, c.name, j.status, j.attempts, j.trajectory_id from jobs j join clusters c on c.id = j.cluster_id"
        " where j.team_id = $1 and c.team_id = $1 and j.removed_at is null and j.status = any($2::text[])"
        " and (j.submission_id = any($3::bigint[]) or j.id = any($4::bigint[]))",
        team_id,
        statuses,
        submissions,
        tasks,
    )
    return [HeldJob(*r) for r in rows]


async def tasks_not_started(pool: asyncpg.Pool, team_id: int, submissions: list[int]) -> list[HeldJob]:
    """The submissions' listed tasks not yet run (queued, retrying or held), on the team's own clusters."""
    rows = await pool.fetch(
        "select j.id, j.cluster_id, c.name, j.status, j.attempts, j.trajectory_id from jobs j join clusters c on c.id = j.cluster_id"
        " where j.submission_id = any($1::bigint[]) and j.team_id = $2 and c.team_id = $2 and j.removed_at is null"
        " and j.status in ('queued', 'retrying', 'holding')",
        submissions,
        team_id,
    )
    return [HeldJob(*r) for r in rows]


async def submissions_of(pool: asyncpg.Pool, job_ids: list[int]) -> dict[int, int]:
    """Each job's submission (job id -> submission id), for those that have one."""
    rows = await pool.fetch(
        "select id, submission_id from jobs where id = any($1::bigint[]) and submission_id is not null", job_ids
    )
    return {r["id"]: r["submission_id"] for r in rows}


async def set_task_status(
    pool: asyncpg.Pool,
    seen: dict[int, int],
    becomes: str,
    new_attempt: bool,
    statuses: list[str],
    killed_error: str,
    action: str = "",
    by: int | None = None,
) -> None:
    """What a task action makes of the tasks still in `statuses` and on the attempt they were read at (`seen`:
    id -> attempts): a new status, maybe a new attempt (which clears the error), or a kill's error. The cluster
    reports the same outcome itself; whichever write lands first, the other is moot. A new attempt also takes
    the downloaded mark off its submission: its results are to be made, and downloaded, again. Their submissions
    say who acted (`action` by user `by`; None: the command line) and when, also where the cluster's report of the
    outcome landed first: the cluster confirmed it acted."""
    async with pool.acquire() as db, db.transaction():
        await db.execute(
            "update jobs j set status = $2, attempts = r.attempts + $3,"
            " error = case when $2 = 'failed' then $5 when $6 then null else j.error end"
            " from unnest($1::bigint[], $7::int[]) as r(id, attempts)"
            " where j.id = r.id and j.attempts = r.attempts and j.removed_at is null and j.status = any($4::text[])",
            list(seen),
            becomes,
            1 if new_attempt else 0,
            statuses,
            killed_error,
            new_attempt,
            list(seen.values()),
        )
        if action:
            await db.execute(
                "update submissions set acted = $2, acted_by = $3, acted_at = now(),"
                " acted_by_name = coalesce((select name from users where id = $3), $4)"
                " where id in (select submission_id from jobs where id = any($1::bigint[]))",
                list(seen),
                action,
                by,
                CLI,
            )
        if new_attempt:
            await db.execute(
                "update submissions set downloaded_at = null where downloaded_at is not null and id in"
                " (select submission_id from jobs where id = any($1::bigint[]))",
                list(seen),
            )
