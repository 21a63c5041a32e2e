"""Task actions of the Submissions page (hold, unhold, kill, retry ...), carried out by the clusters."""

from __future__ import annotations

from ..core.control import KILLED, ActionResult, TaskAction, task_toast
from ..store import activity, tasks
from .commands import Dispatch, ask_clusters, holders, pending_parts


async def run_task_action(
    dispatch: Dispatch,
    action: TaskAction,
    team_id: int,
    submissions: list[int],
    selected: list[int],
    by: int | None = None,
) -> ActionResult:
    """Act on the tasks of the selected submissions (or the `selected` tasks) that `action` takes; recorded in the
    team's activity as done by `by`."""
    pool = dispatch.pool
    rows = await tasks.selected_tasks(pool, team_id, list(action.takes), submissions, selected)
    scope = " ".join([f"submission:{i}" for i in submissions] + [f"task:{i}" for i in selected])
    await activity.record(pool, team_id, by, action.name, len(rows), [r.cluster for r in rows], scope)
    by_cluster, _ = holders(rows)
    if not rows:
        return task_toast(action, 0, 0)
    confirmed = await ask_clusters(dispatch, action.name, by_cluster)
    ids = sorted(i for jobs in confirmed.values() for i in jobs)
    if ids:
        seen = {r.id: r.attempts for r in rows}
        await tasks.set_task_status(
            pool,
            {i: seen[i] for i in ids},
            action.becomes,
            action.new_attempt,
            list(action.takes),
            KILLED,
            action.name,
            by,
        )
    pending = await pending_parts(pool, [r for r in rows if r.cluster_id not in confirmed])
    return task_toast(action, len(rows), len(ids), pending=pending)
