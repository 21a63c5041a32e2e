"""`POST /api/submissions/actions`: the Submissions page's context menu, on selected submissions or tasks."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...control.commands import ask_clusters, holders, shares_of, silence
from ...control.tasks import run_task_action
from ...core.control import TASK_ACTIONS, ActionPreview, ActionResult, Pending, SubmissionsAction, edit_toast, outcome
from ...core.instance_types import InstanceType, refusal
from ...store import activity, clusters, submissions, tasks
from ..http.guards import Refused, decode, endpoint, runtime_of, user
from ..runtime import Runtime
from .instance_types import offered

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
        result = await _act(runtime, team_id, body, user_id)
    return Response(_encoder.encode(result), media_type="application/json")


@endpoint
async def preview_submissions_action(request: Request) -> Response:
    """What a task action (kill, retry ...) would take, per cluster, for the confirmation a person answers first."""
    user_id = user(request)
    body = await decode(request, _decoder, limit=1 << 20)
    action = TASK_ACTIONS.get(body.action)
    if action is None:
        raise Refused(422, "invalid", f"action: {body.action} acts on no tasks: nothing to preview")
    if not body.submissions and not body.tasks:
        raise Refused(422, "invalid", "select submissions or tasks")
    runtime = runtime_of(request)
    team_id = await _team_of_selection(runtime, user_id, body)
    rows = await tasks.selected_tasks(runtime.pool, team_id, list(action.takes), body.submissions, body.tasks)
    preview = ActionPreview(
        action=body.action,
        tasks=len(rows),
        submissions=len(body.submissions),
        clusters=await shares_of(runtime.pool, rows),
    )
    return Response(_encoder.encode(preview), media_type="application/json")


async def _team_of_selection(runtime: Runtime, user_id: int, body: SubmissionsAction) -> int:
    """The one team of every selected submission and task; each must be of a team the caller is in."""
    rows = await submissions.selection(runtime.pool, body.submissions, body.tasks, user_id)
    team_of = {(r.field, r.id): r.team_id for r in rows}
    for field, noun, ids in (("submissions", "submission", body.submissions), ("tasks", "task", body.tasks)):
        for i, selected in enumerate(ids):
            if (field, selected) not in team_of:
                raise Refused(403, "forbidden", f"{field}[{i}]: no {noun} {selected} in your teams")
    teams = set(team_of.values())
    if len(teams) > 1:
        raise Refused(422, "invalid", "select submissions and tasks of one team")
    return teams.pop()


async def _act(runtime: Runtime, team_id: int, body: SubmissionsAction, by: int) -> ActionResult:
    pool = runtime.pool
    chosen = body.submissions
    if body.action in TASK_ACTIONS:
        action = TASK_ACTIONS[body.action]
        result = await run_task_action(runtime.dispatch, action, team_id, chosen, body.tasks, by)
        if body.action in ("hold", "unhold") and chosen:
            await submissions.set_held(pool, chosen, team_id, body.action == "hold")
        return result
    # The others act on the submissions themselves (run_task_action records the task actions).
    scope = " ".join(f"submission:{i}" for i in chosen)
    await activity.record(pool, team_id, by, body.action, len(chosen), scope=scope)
    if body.action == "reviewed":
        return await _reviewed(runtime, team_id, chosen, body.reviewed)
    if body.action == "retry_sync":
        return await _retry_sync(runtime, team_id, chosen, body.tasks)
    return await _edit(runtime, team_id, body, by)


async def _reviewed(runtime: Runtime, team_id: int, chosen: list[int], reviewed: bool) -> ActionResult:
    """Reviewed marks the submissions (or, with `reviewed: false`, takes the mark away); those already so are
    left alone, and counted out."""
    n = await submissions.set_reviewed(runtime.pool, chosen, team_id, reviewed)
    word = "reviewed" if reviewed else "not reviewed"
    return outcome(f"Marked {{n}} submission(s) {word}", n, n, nothing=f"Already marked {word}")


async def _edit(runtime: Runtime, team_id: int, body: SubmissionsAction, by: int) -> ActionResult:
    """Edit / Priority and Edit / Instance Type: recorded, and sent to the clusters for the tasks not yet run."""
    if not body.submissions:
        raise Refused(422, "invalid", "submissions: select the submissions to edit")
    if body.action == "priority":
        if body.priority is None:
            raise Refused(422, "invalid", "priority: a whole number from -1000 to 1000 is required")
        n = await submissions.set_priority(runtime.pool, body.submissions, team_id, body.priority, by)
        what, doing = f"Priority set to {body.priority}", f"Setting priority to {body.priority}"
        priority, instance_type = body.priority, None
    else:
        chosen = await _instance_type(runtime, team_id, body)
        n = await submissions.set_instance_type(runtime.pool, body.submissions, team_id, chosen, by)
        what, doing = f"Instance type set to {chosen.name}", f"Changing instance type to {chosen.name}"
        priority, instance_type = None, chosen.name
    by_cluster, names = holders(await tasks.tasks_not_started(runtime.pool, team_id, body.submissions))
    confirmed = await ask_clusters(runtime.dispatch, body.action, by_cluster, priority, instance_type)
    # A cluster that did not confirm may have applied it all the same: the submissions whose tasks it holds are
    # not confirmed yet, never counted as done or as not done.
    waiting = {c: ids for c, ids in by_cluster.items() if c not in confirmed}
    of = await tasks.submissions_of(runtime.pool, [i for ids in waiting.values() for i in ids])
    silent = await silence(runtime.pool, {c: names[c] for c in waiting})
    pending = [
        Pending(cluster=names[c], count=len({of[i] for i in ids if i in of}), silent_seconds=silent.get(names[c]))
        for c, ids in waiting.items()
    ]
    unsettled = {of[i] for ids in waiting.values() for i in ids if i in of}
    finished = body.action == "instance_type" and n < len(body.submissions)
    return edit_toast(
        what,
        doing,
        len(body.submissions),
        n,
        len(unsettled),
        pending,
        note=FINISHED_KEEP_THEIR_TYPE if finished else "",
    )


FINISHED_KEEP_THEIR_TYPE = "; a finished submission keeps the instance type it ran on"


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


async def _retry_sync(runtime: Runtime, team_id: int, chosen: list[int], selected_tasks: list[int]) -> ActionResult:
    """Sync again the selected submissions whose sync failed, or those of the selected tasks (the sync is their
    submission's): each is asked of the cluster staging it (one written before submissions named their cluster
    is asked of every cluster of the team). Only what a cluster confirms is shown syncing; a cluster that does
    not confirm is named."""
    failed = await submissions.failed_syncs(runtime.pool, chosen, team_id, selected_tasks)
    if not failed:
        return outcome("", 0, 0, nothing="No submissions whose sync failed")
    names = await clusters.team_clusters(runtime.pool, team_id)
    # For `sync` the ids a command carries (and a confirmation answers with) are submissions.
    by_cluster: dict[int, list[int]] = {}
    for r in failed:
        for cluster_id in [r.cluster_id] if r.cluster_id in names else names:
            by_cluster.setdefault(cluster_id, []).append(r.id)
    confirmed = await ask_clusters(runtime.dispatch, "sync", by_cluster)
    synced = sorted({s for ids in confirmed.values() for s in ids} & {r.id for r in failed})
    if synced:
        await submissions.mark_syncing(runtime.pool, synced)
    # A cluster that did not confirm is named when it was asked about a submission nobody confirmed: that part is
    # not confirmed yet (it may have resumed them: the submissions' staging tells).
    silent = await clusters.silent_among(runtime.pool, list(by_cluster))
    # The browser follows those submissions' rows on the team channel: one that leaves sync_failed is syncing again.
    pending = [
        Pending(
            cluster=names[c],
            count=len(waiting),
            submissions=waiting,
            silent_seconds=silent.get(c),
        )
        for c, ids in by_cluster.items()
        if c not in confirmed and (waiting := sorted(set(ids) - set(synced)))
    ]
    return outcome(
        "Retrying sync of {n} submission(s)",
        len(failed),
        len(synced),
        nothing="No submissions whose sync failed",
        pending=pending,
        becomes="syncing",
    )
