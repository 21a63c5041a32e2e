"""`POST /api/submissions/actions`: the Submissions page's context menu, on selected submissions or tasks."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ..control.commands import ask_clusters, holders
from ..control.tasks import run_task_action
from ..core.control import TASK_ACTIONS, ActionResult, SubmissionsAction, unconfirmed_suffix
from .guards import Refused, decode, endpoint, runtime_of, user
from .runtime import Runtime

_decoder = msgspec.json.Decoder(SubmissionsAction)
_encoder = msgspec.json.Encoder()


@endpoint
async def submissions_action(request: Request) -> Response:
    user_id = user(request, acting=True)
    body = await decode(request, _decoder, limit=1 << 20)
    if not body.submissions and not body.tasks:
        raise Refused(422, "invalid", "select submissions or tasks")
    runtime = runtime_of(request)
    team_id = await _team_of_selection(runtime, user_id, body)
    with runtime.actions.slot(user_id, team_id):
        result = await _act(runtime, team_id, body)
    return Response(_encoder.encode(result), media_type="application/json")


# The selected rows of teams the caller is a member of (the others read as rows that do not exist).
_SELECTION = """
select 'submissions' as field, s.id, s.team_id from submissions s
join memberships m on m.team_id = s.team_id and m.user_id = $3 where s.id = any($1::bigint[])
union all
select 'tasks', j.id, j.team_id from jobs j
join memberships m on m.team_id = j.team_id and m.user_id = $3 where j.id = any($2::bigint[])
"""


async def _team_of_selection(runtime: Runtime, user_id: int, body: SubmissionsAction) -> int:
    """The one team of every selected submission and task; each must be of a team the caller is in."""
    rows = await runtime.pool.fetch(_SELECTION, body.submissions, body.tasks, user_id)
    team_of = {(r["field"], r["id"]): r["team_id"] for r in rows}
    for field, noun, ids in (("submissions", "submission", body.submissions), ("tasks", "task", body.tasks)):
        for i, selected in enumerate(ids):
            if (field, selected) not in team_of:
                raise Refused(403, "forbidden", f"{field}[{i}]: no {noun} {selected} in your teams")
    teams = set(team_of.values())
    if len(teams) > 1:
        raise Refused(422, "invalid", "select submissions and tasks of one team")
    return teams.pop()


async def _act(runtime: Runtime, team_id: int, body: SubmissionsAction) -> ActionResult:
    pool, commands, timeout = runtime.pool, runtime.commands, runtime.settings.command_timeout
    chosen = body.submissions
    if body.action in TASK_ACTIONS:
        result = await run_task_action(pool, commands, TASK_ACTIONS[body.action], team_id, chosen, body.tasks, timeout)
        if body.action in ("hold", "unhold") and chosen:
            await pool.execute(
                "update submissions set held = $2 where id = any($1::bigint[]) and team_id = $3",
                chosen,
                body.action == "hold",
                team_id,
            )
        return result
    if body.action == "reviewed":
        status = await pool.execute(
            "update submissions set reviewed = true where id = any($1::bigint[]) and team_id = $2", chosen, team_id
        )
        return ActionResult(message=f"Marked {status.split()[-1]} submission(s) reviewed", acted=int(status.split()[-1]), unconfirmed=[])
    if body.action == "retry_sync":
        return await _retry_sync(runtime, team_id, chosen)
    return await _edit(runtime, team_id, body)


async def _tasks_not_started(
    runtime: Runtime, team_id: int, submissions: list[int]
) -> tuple[dict[int, list[int]], dict[int, str]]:
    rows = await runtime.pool.fetch(
        "select j.id, j.cluster_id, c.name from jobs j join clusters c on c.id = j.cluster_id"
        " where j.submission_id = any($1::bigint[]) and j.team_id = $2 and c.team_id = $2 and j.removed_at is null"
        " and j.status in ('queued', 'retrying', 'holding')",
        submissions,
        team_id,
    )
    return holders(rows)


async def _edit(runtime: Runtime, team_id: int, body: SubmissionsAction) -> ActionResult:
    """Edit / Priority and Edit / Instance Type: recorded, and sent to the clusters for the tasks not yet run."""
    if body.action == "priority":
        if body.priority is None:
            return ActionResult(message="Choose a priority", acted=0, unconfirmed=[])
        status = await runtime.pool.execute(
            "update submissions set priority = $2 where id = any($1::bigint[]) and team_id = $3",
            body.submissions,
            body.priority,
            team_id,
        )
        what = f"Priority set to {body.priority}"
        extra_any: dict[str, object] = {"priority": body.priority}
    else:
        if body.instance_type is None:
            return ActionResult(message="Choose an instance type", acted=0, unconfirmed=[])
        status = await runtime.pool.execute(
            "update submissions set instance_type = $2, cores = coalesce($3, cores), memory_gb = coalesce($4, memory_gb)"
            " where id = any($1::bigint[]) and team_id = $5",
            body.submissions,
            body.instance_type,
            body.cores,
            body.memory_gb,
            team_id,
        )
        what = f"Instance type set to {body.instance_type}"
        extra_any = {"instance_type": body.instance_type}
    by_cluster, names = await _tasks_not_started(runtime, team_id, body.submissions)
    confirmed = await ask_clusters(runtime.commands, body.action, by_cluster, runtime.settings.command_timeout, **extra_any)
    silent = sorted(names[c] for c in by_cluster if c not in confirmed)
    n = int(status.split()[-1])
    return ActionResult(message=f"{what} on {n} submission(s){unconfirmed_suffix(silent)}", acted=n, unconfirmed=silent)


async def _retry_sync(runtime: Runtime, team_id: int, submissions: list[int]) -> ActionResult:
    """Sync again the selected submissions whose sync failed; the cluster storing the data confirms."""
    failed = [
        r["id"]
        for r in await runtime.pool.fetch(
            "select id from submissions where id = any($1::bigint[]) and team_id = $2 and staging = 'sync_failed'",
            submissions,
            team_id,
        )
    ]
    if not failed:
        return ActionResult(message="No submissions whose sync failed", acted=0, unconfirmed=[])
    clusters = await runtime.pool.fetch("select id, name from clusters where team_id = $1", team_id)
    # For `sync` the ids a command carries (and a confirmation answers with) are submissions.
    by_cluster: dict[int, list[int]] = {r["id"]: failed for r in clusters}
    confirmed = await ask_clusters(runtime.commands, "sync", by_cluster, runtime.settings.command_timeout, submissions=failed)
    synced = sorted({s for ids in confirmed.values() for s in ids} & set(failed))
    if synced:
        await runtime.pool.execute(
            "update submissions set staging = 'syncing' where id = any($1::bigint[]) and staging = 'sync_failed'", synced
        )
    return ActionResult(message=f"Retrying sync of {len(synced)} submission(s)", acted=len(synced), unconfirmed=[])
