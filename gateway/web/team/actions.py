"""Remove Running Jobs and Retry Failed Jobs: a person's actions, carried out by the clusters.

`POST /api/trajectories/<id>/remove-running` (`GET .../remove-running/preview`: what it would take), `POST /api/trajectories/<id>/retry-failed`
(`GET .../retry-failed/preview`),
`POST /api/analyses/<id>/retry-failed`, with the same token as the websocket. The JSON answer's `message`
is the toast, word for word.
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...control.commands import preview_removal, run_action
from ...core.control import Action
from ...store import queries
from ...store.tasks import Scope
from ..http.guards import endpoint, members_team, path_id, runtime_of, user

_encoder = msgspec.json.Encoder()
_NOT_A_MEMBER = "only members of the team may act on its jobs"  # also for an id that does not exist


async def _act(request: Request, action: Action, scope: Scope) -> Response:
    user_id = user(request, acting=True)
    runtime = runtime_of(request)
    raw = path_id(request)
    team_of = queries.members_team_of_analysis if scope == "analysis_frames" else queries.members_team_of_trajectory
    team_id = await members_team(request, user_id, team_of, raw, _NOT_A_MEMBER)
    with runtime.actions.slot(user_id, team_id):
        result = await run_action(runtime.dispatch, action, team_id, scope, raw, by=user_id)
    return Response(_encoder.encode(result), media_type="application/json")


async def _preview(request: Request, action: Action) -> Response:
    user_id = user(request)
    runtime = runtime_of(request)
    trajectory_id = path_id(request)
    team_id = await members_team(request, user_id, queries.members_team_of_trajectory, trajectory_id, _NOT_A_MEMBER)
    preview = await preview_removal(runtime.pool, team_id, trajectory_id, action)
    return Response(_encoder.encode(preview), media_type="application/json")


@endpoint
async def preview_remove_running(request: Request) -> Response:
    """What Remove Running Jobs would stop, per cluster, for the confirmation a person answers first."""
    return await _preview(request, "remove")


@endpoint
async def preview_retry_failed(request: Request) -> Response:
    """What Retry Failed Jobs would queue again, per cluster: the browser asks first when one of them is silent."""
    return await _preview(request, "retry")


@endpoint
async def remove_running(request: Request) -> Response:
    return await _act(request, "remove", "trajectory")


@endpoint
async def retry_failed(request: Request) -> Response:
    return await _act(request, "retry", "trajectory")


@endpoint
async def retry_failed_frames(request: Request) -> Response:
    return await _act(request, "retry", "analysis_frames")  # the analysis's frames, not its artifact upload
