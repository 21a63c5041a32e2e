"""The HTTP API for the browser and tools: who am I, and which teams can I follow."""

from __future__ import annotations

from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response

from ..hub.presence import online_users
from ..store import queries
from .auth import TOKEN_COOKIE, InvalidToken, verify_token
from .runtime import Runtime


def bearer_token(conn: HTTPConnection) -> str | None:
    """The token of a request or handshake: Authorization header, then `?token=`, then the cookie."""
    auth = conn.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return conn.query_params.get("token") or conn.cookies.get(TOKEN_COOKIE)


def authenticate(conn: HTTPConnection, runtime: Runtime) -> int:
    """The user id behind a request; raises InvalidToken (safe to show) when there is none."""
    token = bearer_token(conn)
    if not token:
        raise InvalidToken("missing token")
    return verify_token(runtime.settings.secret, token)


async def me(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    try:
        user_id = authenticate(request, runtime)
    except InvalidToken as exc:
        return JSONResponse({"error": "unauthorized", "message": str(exc)}, 401)
    user = await runtime.pool.fetchrow("select id, name from users where id = $1", user_id)
    if user is None:
        return JSONResponse({"error": "unauthorized", "message": "unknown user"}, 401)
    teams = await runtime.pool.fetch(
        "select t.id, t.name from teams t join memberships m on m.team_id = t.id where m.user_id = $1 order by t.name",
        user_id,
    )
    settings = runtime.settings
    return JSONResponse(
        {
            "user": dict(user),
            "teams": [dict(t) for t in teams],
            "single_user": settings.single_user,
            "local": settings.local,
            "demo": settings.demo,
        }
    )


async def team_members(request: Request) -> Response:
    """My Team: the members, and who is online now (across every node)."""
    runtime: Runtime = request.app.state.runtime
    try:
        user_id = authenticate(request, runtime)
    except InvalidToken as exc:
        return JSONResponse({"error": "unauthorized", "message": str(exc)}, 401)
    team_id = request.path_params["id"]
    if not await queries.is_member(runtime.pool, user_id, team_id):
        return JSONResponse({"error": "forbidden", "message": "not a member of this team"}, 403)
    rows = await runtime.pool.fetch(
        "select u.id, u.name from users u join memberships m on m.user_id = u.id where m.team_id = $1 order by u.name",
        team_id,
    )
    online = set() if runtime.settings.single_user else await online_users(runtime.redis, team_id)
    members = [{"id": r["id"], "name": r["name"], "online": r["id"] in online} for r in rows]
    body: dict[str, object] = {"members": members}
    if not runtime.settings.single_user:
        body["online"] = sum(1 for m in members if m["online"])
    return JSONResponse(body)


async def team_trajectories(request: Request) -> Response:
    """The dashboard's cards: the team's trajectories, newest first (the live counts come on the team channel)."""
    runtime: Runtime = request.app.state.runtime
    try:
        user_id = authenticate(request, runtime)
    except InvalidToken as exc:
        return JSONResponse({"error": "unauthorized", "message": str(exc)}, 401)
    team_id = request.path_params["id"]
    if not await queries.is_member(runtime.pool, user_id, team_id):
        return JSONResponse({"error": "forbidden", "message": "not a member of this team"}, 403)
    rows = await runtime.pool.fetch(
        "select id, name, created_at from trajectories where team_id = $1 order by created_at desc, id desc limit 500",
        team_id,
    )
    return JSONResponse({"trajectories": [{"id": r["id"], "name": r["name"], "created_at": r["created_at"].isoformat()} for r in rows]})
