"""What clusters write through the ingest API: a batch of job reports in one transaction (all or nothing, the
rules enforced in SQL), and the trajectories and analyses they register."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from ..core.ingest import (
    IngestBatch,
    IngestResponse,
    IngestResult,
    InvalidReport,
    JobReport,
    check_new_job,
    report_applies,
)

# The same rules as core.ingest.report_applies, so that they hold whoever calls this path.
_UPDATE = """
update jobs j set status = r.status, attempts = r.attempt, error = r.error,
                  removed_at = case when r.removed then statement_timestamp() end,
                  -- a start the gateway did not see (its running report folded into this batch), as the cluster
                  -- says it (never later than now); a running report's start is the trigger's (jobs_stamp)
                  started_at = case when r.started is not null and (j.started_at is null or r.attempt > j.attempts)
                                    then least(r.started, statement_timestamp()) else j.started_at end
from unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $6::bool[], $7::timestamptz[])
     as r(id, attempt, status, error, removed, started)
where j.id = r.id and j.cluster_id = $5 and j.removed_at is null
  and (r.attempt > j.attempts
       or (r.attempt = j.attempts and j.status not in ('completed', 'failed')
           and not (j.status = 'running' and r.status in ('queued', 'retrying'))))
returning j.id
"""

_INSERT = """
insert into jobs (team_id, cluster_id, trajectory_id, kind, name, frame, timestep, analysis_id, status, attempts, error,
                  submission_id)
select $1, $2, r.trajectory_id, r.kind, r.name, r.frame, r.timestep, r.analysis_id, r.status, r.attempt, r.error,
       r.submission_id
from unnest($3::bigint[], $4::text[], $5::text[], $6::int[], $7::float8[], $8::bigint[], $9::text[], $10::int[], $11::text[],
            $12::bigint[])
     with ordinality as r(trajectory_id, kind, name, frame, timestep, analysis_id, status, attempt, error, submission_id, ord)
order by r.ord
returning id
"""


async def create_trajectory(pool: asyncpg.Pool, team_id: int, name: str) -> int:
    new_id: int = await pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, $2) returning id", team_id, name
    )
    return new_id


async def create_analysis(pool: asyncpg.Pool, team_id: int, trajectory_id: int, plugin: str) -> int | None:
    """A new analysis of the team's trajectory; None when the team has no such trajectory."""
    new_id: int | None = await pool.fetchval(
        "insert into analyses (trajectory_id, plugin) select id, $3 from trajectories where id = $1 and team_id = $2"
        " returning id",
        trajectory_id,
        team_id,
        plugin,
    )
    return new_id


async def has_trajectory(pool: asyncpg.Pool, team_id: int, trajectory_id: int) -> bool:
    return bool(
        await pool.fetchval("select 1 from trajectories where id = $1 and team_id = $2", trajectory_id, team_id)
    )


async def apply_reports(
    pool: asyncpg.Pool, cluster_id: int, team_id: int, batch: IngestBatch, trace: str | None = None
) -> IngestResponse:
    """Apply the batch in one transaction; `trace` (a traceparent, when tracing is on) goes into every outbox row
    the transaction writes (sql/020_trace_context.sql)."""
    new = [(i, r) for i, r in enumerate(batch.jobs) if r.id is None]
    known = [(i, r) for i, r in enumerate(batch.jobs) if r.id is not None]
    for i, r in new:
        check_new_job(i, r)
    results: list[IngestResult | None] = [None] * len(batch.jobs)
    try:
        async with pool.acquire() as db, db.transaction():
            if trace is not None:
                await db.execute("select set_config('gateway.trace_context', $1, true)", trace)
            created = await _insert(db, cluster_id, team_id, new)
            for (i, _), job_id in zip(new, created):
                results[i] = IngestResult(job_id, "created")
            updated = await _update(db, cluster_id, known)
            for i, r in known:
                assert r.id is not None
                results[i] = IngestResult(r.id, "updated" if r.id in updated else "ignored")
    except asyncpg.ForeignKeyViolationError as exc:
        # Checked above, but a row named can be deleted before the insert lands (sql/007_team_references.sql).
        field = _FIELD_OF.get(exc.constraint_name or "", "a reference")
        raise InvalidReport(f"jobs: {field} names a row deleted while the batch was written") from None
    jobs = [r for r in results if r is not None]
    return IngestResponse(
        created=len(created),
        updated=sum(1 for r in jobs if r.result == "updated"),
        ignored=sum(1 for r in jobs if r.result == "ignored"),
        jobs=jobs,
    )


async def _insert(db: asyncpg.Connection, cluster_id: int, team_id: int, new: list) -> list[int]:
    if not new:
        return []
    await _check_references(db, cluster_id, team_id, new)
    reports = [r for _, r in new]
    rows = await db.fetch(
        _INSERT,
        team_id,
        cluster_id,
        [r.trajectory_id for r in reports],
        [r.kind for r in reports],
        [r.name for r in reports],
        [r.frame for r in reports],
        [r.timestep for r in reports],
        [r.analysis_id for r in reports],
        [r.status for r in reports],
        [r.attempt for r in reports],
        [r.error for r in reports],
        [r.submission_id for r in reports],
    )
    return [row["id"] for row in rows]


# The team's rows among the ids a batch names ($1), each with the column a check needs.
_TRAJECTORIES = "select id, team_id from trajectories where id = any($1::bigint[]) and team_id = $2"
_ANALYSES = (
    "select a.id, a.trajectory_id from analyses a join trajectories t on t.id = a.trajectory_id"
    " where a.id = any($1::bigint[]) and t.team_id = $2"
)
# A submission a cluster staged is that cluster's own: another cluster of the team adds no job to it. One with no
# cluster (written before submissions named theirs) is any of its team's clusters'.
_SUBMISSIONS = (
    "select id, team_id from submissions where id = any($1::bigint[]) and team_id = $2"
    " and (cluster_id is null or cluster_id = $3)"
)
# The field a foreign key of sql/007_team_references.sql checks.
_FIELD_OF = {
    "jobs_trajectory_team": "trajectory_id",
    "jobs_analysis_trajectory": "analysis_id",
    "jobs_submission_team": "submission_id",
    "submissions_trajectory_team": "trajectory_id",
}


async def _check_references(
    db: asyncpg.Connection, cluster_id: int, team_id: int, new: list[tuple[int, JobReport]]
) -> None:
    """Every row a new job names is the cluster's team's (its submission, the cluster's own): someone else's
    reads exactly like one that does not exist, so a refusal tells nothing about other teams or clusters. An
    analysis must also be of the job's trajectory."""
    trajectories = await _team_rows(db, _TRAJECTORIES, team_id, [r.trajectory_id for _, r in new])
    analyses = await _team_rows(db, _ANALYSES, team_id, [r.analysis_id for _, r in new])
    submissions = await _team_rows(db, _SUBMISSIONS, team_id, [r.submission_id for _, r in new], cluster_id)
    for i, r in new:
        if r.trajectory_id not in trajectories:
            raise InvalidReport(f"jobs[{i}].trajectory_id: no trajectory {r.trajectory_id} in this cluster's team")
        if r.analysis_id is not None and r.analysis_id not in analyses:
            raise InvalidReport(f"jobs[{i}].analysis_id: no analysis {r.analysis_id} in this cluster's team")
        if r.analysis_id is not None and analyses[r.analysis_id] != r.trajectory_id:
            raise InvalidReport(
                f"jobs[{i}].analysis_id: analysis {r.analysis_id} is not of trajectory {r.trajectory_id}"
            )
        if r.submission_id is not None and r.submission_id not in submissions:
            raise InvalidReport(f"jobs[{i}].submission_id: no submission {r.submission_id} of this cluster")


async def _team_rows(
    db: asyncpg.Connection, query: str, team_id: int, wanted: list[int | None], *more: int
) -> dict[int, int]:
    ids = sorted({i for i in wanted if i is not None})
    if not ids:
        return {}
    return {row[0]: row[1] for row in await db.fetch(query, ids, team_id, *more)}


async def _update(db: asyncpg.Connection, cluster_id: int, known: list) -> set[int]:
    if not known:
        return set()
    ids = sorted({r.id for _, r in known})
    rows = await db.fetch(
        "select id, attempts, status, removed_at is not null as removed from jobs"
        " where id = any($1::bigint[]) and cluster_id = $2 order by id for update",
        ids,
        cluster_id,
    )
    current = {row["id"]: (row["attempts"], row["status"], row["removed"]) for row in rows}
    for i, r in known:
        if r.id not in current:
            raise InvalidReport(f"jobs[{i}].id: no job {r.id} on this cluster")
    # Fold several reports about one job in order; only the survivor goes to SQL.
    final: dict[int, tuple[int, str, str | None, bool, datetime | None]] = {}
    for _, r in known:
        attempts, status, removed = current[r.id]
        if report_applies(attempts, status, removed, r.attempt, r.status):
            current[r.id] = (r.attempt, r.status, r.removed)
            before = final.get(r.id)
            # A start said by an earlier report of the same attempt in this batch stays with the one that wins.
            started = r.started_at or (before[4] if before is not None and before[0] == r.attempt else None)
            final[r.id] = (r.attempt, r.status, r.error, r.removed, started)
    if not final:
        return set()
    items = list(final.items())
    rows = await db.fetch(
        _UPDATE,
        [job_id for job_id, _ in items],
        [v[0] for _, v in items],
        [v[1] for _, v in items],
        [v[2] for _, v in items],
        cluster_id,
        [v[3] for _, v in items],
        [v[4] for _, v in items],
    )
    return {row["id"] for row in rows}
