"""Task actions of the Submissions page (hold, unhold, kill, retry ...), carried out by the clusters."""

from __future__ import annotations

import asyncpg

from ..bus.commands import ClusterCommands
from ..core.control import KILLED, ActionResult, TaskAction, task_toast
from .commands import ask_clusters, holders


async def run_task_action(
    pool: asyncpg.Pool,
    commands: ClusterCommands,
    action: TaskAction,
    team_id: int,
    submissions: list[int],
    tasks: list[int],
    timeout: float,
) -> ActionResult:
    """Act on the tasks of the selected submissions (or the selected tasks) that `action` takes."""
    rows = await pool.fetch(
        "select j.id, j.cluster_id, c.name from jobs j join clusters c on c.id = j.cluster_id"
        " where j.team_id = $1 and c.team_id = $1 and j.removed_at is null and j.status = any($2::text[])"
        " and (j.submission_id = any($3::bigint[]) or j.id = any($4::bigint[]))",
        team_id,
        list(action.takes),
        submissions,
        tasks,
    )
    by_cluster, names = holders(rows)
    if not rows:
        return task_toast(action, 0, 0, [])
    confirmed = await ask_clusters(commands, action.name, by_cluster, timeout)
    ids = sorted(i for jobs in confirmed.values() for i in jobs)
    if ids:
        await pool.execute(
            "update jobs set status = $2, attempts = attempts + $3,"
            " error = case when $2 = 'failed' then $5 when $6 then null else error end"
            " where id = any($1::bigint[]) and removed_at is null and status = any($4::text[])",
            ids,
            action.becomes,
            1 if action.new_attempt else 0,
            list(action.takes),
            KILLED,
            action.new_attempt,
        )
    return task_toast(action, len(rows), len(ids), [names[c] for c in by_cluster if c not in confirmed])
