"""The analysis listing: a trajectory's analyses with their frames' progress, and Delete analysis.

`GET /api/trajectories/<id>/analyses` lists them, newest first. `DELETE /api/analyses/<id>` deletes one: its
jobs still queued or running are stopped through their clusters (as Remove Running Jobs does), then its results
are deleted: in this data model an analysis's results are its jobs (one per frame, kind `analysis`, and the
Artifact Upload that stores them), so they leave every list and count for everyone (tombstoned through the
captured path, like a removed job), and the analysis leaves the listing. If a cluster does not confirm that it
stopped the analysis's jobs, nothing is deleted: the toast names it, and Delete can be tried again. Removing
jobs (Remove Running Jobs) never deletes results; deleting the analysis does.
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...control.commands import run_action
from ...core.control import REMOVABLE, ActionResult, not_deleted
from ...store import activity, analyses, queries
from ..http.answers import Analyses, AnalysisRow, answer
from ..http.guards import Refused, endpoint, members_team, path_id, runtime_of, user

_encoder = msgspec.json.Encoder()
LISTED = 200  # analyses a listing shows, newest first


@endpoint
async def trajectory_analyses(request: Request) -> Response:
    trajectory_id = path_id(request)
    pool = runtime_of(request).pool
    await members_team(
        request, user(request), queries.members_team_of_trajectory, trajectory_id, "not a member of this team"
    )
    rows = await analyses.listing(pool, trajectory_id, LISTED)
    return answer(
        Analyses(
            [
                AnalysisRow(
                    id=r.id,
                    plugin=r.plugin,
                    created_at=r.created_at.isoformat(),
                    frames=r.frames,
                    completed=r.completed,
                    failed=r.failed,
                    running=r.running,
                    queued=r.queued,
                    silent=r.silent,
                    holding=r.holding,
                    clusters=r.clusters,
                )
                for r in rows
            ]
        )
    )


@endpoint
async def delete_analysis(request: Request) -> Response:
    user_id = user(request, acting=True)
    analysis_id = path_id(request)
    runtime = runtime_of(request)
    pool = runtime.pool
    team_id = await members_team(
        request,
        user_id,
        queries.members_team_of_analysis,
        analysis_id,
        "only members of the team may delete its analyses",
    )
    found = await analyses.find(pool, analysis_id)
    if found is None or found.deleted:
        raise Refused(404, "not_found", f"id: no analysis {analysis_id}")
    plugin = found.plugin
    active = await analyses.count_jobs(pool, analysis_id, team_id, list(REMOVABLE))
    with runtime.actions.slot(user_id, team_id):
        stopped = (
            await run_action(runtime.dispatch, "remove", team_id, "analysis", analysis_id, by=user_id)
            if active
            else ActionResult(message="", acted=0, unconfirmed=[], level="info")
        )
    if stopped.unconfirmed:
        return Response(_encoder.encode(not_deleted(plugin, stopped)), media_type="application/json")
    results = await analyses.delete(pool, analysis_id, team_id)
    await activity.record(pool, team_id, user_id, "delete_analysis", results, scope=f"analysis:{analysis_id}")
    parts = [f"stopped {stopped.acted} job(s)"] if active else []
    parts.append(f"deleted {results} result(s)")
    result = ActionResult(
        message=f"Deleted analysis {plugin}: {', '.join(parts)}",
        acted=results + stopped.acted,
        unconfirmed=[],
        level="success",
    )
    return Response(_encoder.encode(result), media_type="application/json")
