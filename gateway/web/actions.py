"""Remove Running Jobs and Retry Failed Jobs: a person's actions, carried out by the clusters.

`POST /api/trajectories/<id>/remove-running`, `POST /api/trajectories/<id>/retry-failed`,
`POST /api/analyses/<id>/retry-failed`, with the same token as the websocket. The JSON answer's `message`
is the toast, word for word.
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..control.commands import run_action
from ..core.control import Action
from ..store import queries
from .api import authenticate
from .auth import InvalidToken
from .runtime import Runtime

_encoder = msgspec.json.Encoder()


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status)


async def _act(request: Request, action: Action, scope: str) -> Response:
    runtime: Runtime = request.app.state.runtime
    try:
        user_id = authenticate(request, runtime)
    except InvalidToken as exc:
        return _error(401, "unauthorized", str(exc))
    origin = request.headers.get("origin")
    if origin is not None and not runtime.origin_allowed(origin, request.headers.get("host", "")):
        return _error(403, "origin_not_allowed", "this origin may not act on jobs")
    raw = request.path_params["id"]
    team_id = await (queries.team_of_analysis if scope == "analysis" else queries.team_of_trajectory)(runtime.pool, raw)
    if team_id is None or not await queries.is_member(runtime.pool, user_id, team_id):
        return _error(403, "forbidden", "only members of the team may act on its jobs")
    where = "j.analysis_id = $1 and j.kind = 'analysis'" if scope == "analysis" else "j.trajectory_id = $1"
    result = await run_action(runtime.pool, runtime.redis, action, where, raw, runtime.settings.command_timeout)
    return Response(_encoder.encode(result), media_type="application/json")


async def remove_running(request: Request) -> Response:
    return await _act(request, "remove", "trajectory")


async def retry_failed(request: Request) -> Response:
    return await _act(request, "retry", "trajectory")


async def retry_failed_frames(request: Request) -> Response:
    return await _act(request, "retry", "analysis")
