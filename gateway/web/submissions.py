"""`POST /api/submissions/actions`: the Submissions page's context menu, on selected submissions or tasks."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ..control.commands import ask_clusters, holders
from ..control.tasks import run_task_action
from ..core.control import TASK_ACTIONS, ActionResult, SubmissionsAction, outcome
from ..core.instance_types import InstanceType, refusal
from .guards import Refused, decode, endpoint, runtime_of, user
from .instance_types import offered
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
        return await _reviewed(runtime, team_id, chosen, body.reviewed)
    if body.action == "retry_sync":
        return await _retry_sync(runtime, team_id, chosen)
    return await _edit(runtime, team_id, body)


async def _reviewed(runtime: Runtime, team_id: int, submissions: list[int], reviewed: bool) -> ActionResult:
    """Reviewed marks the submissions (or, with `reviewed: false`, takes the mark away); those already so are
    left alone, and counted out."""
    status = await runtime.pool.execute(
        "update submissions set reviewed = $3 where id = any($1::bigint[]) and team_id = $2 and reviewed <> $3",
        submissions,
        team_id,
        reviewed,
    )
    n = int(status.split()[-1])
    word = "reviewed" if reviewed else "not reviewed"
    return outcome(f"Marked {{n}} submission(s) {word}", n, n, [], nothing=f"Already marked {word}")


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
    if not body.submissions:
        raise Refused(422, "invalid", "submissions: select the submissions to edit")
    if body.action == "priority":
        if body.priority is None:
            raise Refused(422, "invalid", "priority: a whole number from -1000 to 1000 is required")
        status = await runtime.pool.execute(
            "update submissions set priority = $2 where id = any($1::bigint[]) and team_id = $3",
            body.submissions,
            body.priority,
            team_id,
        )
        what = f"Priority set to {body.priority}"
        extra_any: dict[str, object] = {"priority": body.priority}
    else:
        chosen = await _instance_type(runtime, team_id, body)
        status = await runtime.pool.execute(
            "update submissions set instance_type = $2, cores = $3, memory_gb = $4, preemptible = $5"
            " where id = any($1::bigint[]) and team_id = $6",
            body.submissions,
            chosen.name,
            chosen.cores,
            chosen.memory_gb,
            chosen.preemptible,
            team_id,
        )
        what = f"Instance type set to {chosen.name}"
        extra_any = {"instance_type": chosen.name}
    by_cluster, names = await _tasks_not_started(runtime, team_id, body.submissions)
    confirmed = await ask_clusters(
        runtime.commands, body.action, by_cluster, runtime.settings.command_timeout, **extra_any
    )
    silent = [names[c] for c in by_cluster if c not in confirmed]
    n = int(status.split()[-1])
    return outcome(f"{what} on {{n}} submission(s)", len(body.submissions), n, silent, nothing="No submissions to edit")


async def _instance_type(runtime: Runtime, team_id: int, body: SubmissionsAction) -> InstanceType:
    """The chosen type, if every cluster holding the submissions offers it; else a 422 naming what they offer."""
    if body.instance_type is None:
        raise Refused(422, "invalid", "instance_type: choose one of the cluster's instance types")
    choices = await offered(runtime.pool, team_id, body.submissions)
    found = next((t for t in choices.instance_types if t.name == body.instance_type), None)
    if found is None:
        raise Refused(422, "invalid", refusal(body.instance_type, choices.instance_types, choices.clusters))
    if body.cores is not None and body.cores != found.cores:
        raise Refused(422, "invalid", f"cores: instance type {found.name} has {found.cores} cores")
    if body.memory_gb is not None and body.memory_gb != found.memory_gb:
        raise Refused(422, "invalid", f"memory_gb: instance type {found.name} has {found.memory_gb} GB")
    return found


async def _retry_sync(runtime: Runtime, team_id: int, submissions: list[int]) -> ActionResult:
    """Sync again the selected submissions whose sync failed: each is asked of the cluster staging it (one
    written before submissions named their cluster is asked of every cluster of the team). Only what a cluster
    confirms is shown syncing; a cluster that does not confirm is named."""
    failed = await runtime.pool.fetch(
        "select id, cluster_id from submissions where id = any($1::bigint[]) and team_id = $2 and staging = 'sync_failed'",
        submissions,
        team_id,
    )
    if not failed:
        return outcome("", 0, 0, [], nothing="No submissions whose sync failed")
    clusters = {
        r["id"]: r["name"]
        for r in await runtime.pool.fetch("select id, name from clusters where team_id = $1", team_id)
    }
    # For `sync` the ids a command carries (and a confirmation answers with) are submissions.
    by_cluster: dict[int, list[int]] = {}
    for r in failed:
        for cluster_id in [r["cluster_id"]] if r["cluster_id"] in clusters else clusters:
            by_cluster.setdefault(cluster_id, []).append(r["id"])
    confirmed = await ask_clusters(runtime.commands, "sync", by_cluster, runtime.settings.command_timeout)
    synced = sorted({s for ids in confirmed.values() for s in ids} & {r["id"] for r in failed})
    if synced:
        await runtime.pool.execute(
            "update submissions set staging = 'syncing' where id = any($1::bigint[]) and staging = 'sync_failed'",
            synced,
        )
    # A cluster that did not confirm is named when it was asked about a submission nobody confirmed.
    silent = [clusters[c] for c, ids in by_cluster.items() if c not in confirmed and set(ids) - set(synced)]
    return outcome(
        "Retrying sync of {n} submission(s)",
        len(failed),
        len(synced),
        silent,
        nothing="No submissions whose sync failed",
    )
