"""What a relay's estimates of time left start from (gateway.core.eta): one partition's unfinished work and its
clusters' recent job durations, read in the snapshot its aggregates are loaded from (gateway.store.outbox)."""

from __future__ import annotations

import asyncpg

from ..core.work_snapshot import RecentDurations, RunningJob, WaitingWork, WorkSnapshot

# Unfinished jobs not running, per batch (trajectory, submission, analysis), kind and listed status; in the order
# the work arrived (its first job's id), as the clusters take it.
_WAITING = """
select cluster_id, kind, trajectory_id, submission_id, analysis_id, job_listed_status(status, silent_since) as status,
       count(*) as n
from jobs
where removed_at is null and status not in ('completed', 'failed', 'preempted') and team_id % $1 = $2
  and job_listed_status(status, silent_since) <> 'running'
group by 1, 2, 3, 4, 5, 6
order by min(id)
"""
# Running jobs one by one (as many as the clusters have workers): how long each has run counts.
_RUNNING = """
select id, cluster_id, kind, trajectory_id, submission_id, analysis_id,
       extract(epoch from started_at)::float8 as started
from jobs
where removed_at is null and status = 'running' and silent_since is null and team_id % $1 = $2
"""
# Per cluster and kind, the mean duration of the last jobs completed in the past hour (at most SAMPLES of them).
SAMPLES = 20
_DURATIONS = f"""
select cluster_id, kind, count(*) as n, avg(extract(epoch from finished_at - started_at))::float8 as mean
from (select cluster_id, kind, started_at, finished_at,
             row_number() over (partition by cluster_id, kind order by finished_at desc) as r
      from jobs
      where removed_at is null and status = 'completed' and started_at is not null and finished_at >= started_at
        and finished_at > statement_timestamp() - interval '1 hour' and team_id % $1 = $2) recent
where r <= {SAMPLES}
group by 1, 2
"""


async def snapshot(db: asyncpg.Connection, partitions: int = 1, partition: int = 0) -> WorkSnapshot:
    """The partition's unfinished work and recent durations (call it inside the snapshot's transaction)."""
    waiting = await db.fetch(_WAITING, partitions, partition)
    running = await db.fetch(_RUNNING, partitions, partition)
    durations = await db.fetch(_DURATIONS, partitions, partition)
    return WorkSnapshot(
        waiting=[
            WaitingWork(
                r["cluster_id"],
                r["kind"],
                r["trajectory_id"],
                r["submission_id"],
                r["analysis_id"],
                r["status"],
                r["n"],
            )
            for r in waiting
        ],
        running=[
            RunningJob(
                r["id"],
                r["cluster_id"],
                r["kind"],
                r["trajectory_id"],
                r["submission_id"],
                r["analysis_id"],
                r["started"],
            )
            for r in running
        ],
        durations=[RecentDurations(r["cluster_id"], r["kind"], r["n"], r["mean"]) for r in durations],
    )
