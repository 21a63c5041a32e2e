"""Signing in the browser: a token in the URL becomes an HttpOnly cookie; demo mode has a user picker."""

from __future__ import annotations

import time
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response

from .auth import TOKEN_COOKIE, InvalidToken, issue_token, verify_token
from .guards import endpoint, runtime_of, user
from .runtime import Runtime

INDEX = Path(__file__).resolve().parents[2] / "frontend" / "index.html"


def with_session(response: Response, request: Request, runtime: Runtime, token: str) -> Response:
    response.set_cookie(
        TOKEN_COOKIE,
        token,
        max_age=runtime.settings.token_ttl,
        httponly=True,  # no script can read it
        samesite="strict",  # no other site's page sends it
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


async def index(request: Request) -> Response:
    """The app. `/?token=...` swaps the token for a cookie and redirects to a URL without it."""
    runtime: Runtime = request.app.state.runtime
    token = request.query_params.get("token")
    if token:
        try:
            verify_token(runtime.settings.secret, token)
        except InvalidToken:
            return RedirectResponse("/?signin=expired", status_code=303)
        return with_session(RedirectResponse(request.url.path, status_code=303), request, runtime, token)
    return FileResponse(INDEX, headers={"Cache-Control": "no-store"})


async def demo_users(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    if not runtime.settings.demo:
        return JSONResponse({"error": "not_found", "message": "no user picker outside demo mode"}, 404)
    rows = await runtime.pool.fetch("select id, name from users order by id")
    return JSONResponse({"users": [dict(r) for r in rows]})


async def demo_sign_in(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    if not runtime.settings.demo:
        return JSONResponse({"error": "not_found", "message": "no user picker outside demo mode"}, 404)
    try:
        user_id = int((await request.json())["user_id"])
    except (ValueError, KeyError, TypeError):
        return JSONResponse({"error": "invalid", "message": "user_id: expected an integer"}, 422)
    if not await runtime.pool.fetchval("select 1 from users where id = $1", user_id):
        return JSONResponse({"error": "invalid", "message": f"user_id: no user {user_id}"}, 422)
    token = issue_token(runtime.settings.secret, user_id, runtime.settings.token_ttl)
    return with_session(JSONResponse({"ok": True}), request, runtime, token)


async def sign_out(request: Request) -> Response:
    response = JSONResponse({"ok": True})
    response.delete_cookie(TOKEN_COOKIE, path="/")
    return response


@endpoint
async def renew(request: Request) -> Response:
    """A session about to expire gets a new cookie without a reload (the current token must still be valid)."""
    runtime = runtime_of(request)
    user_id = user(request, acting=True)
    token = issue_token(runtime.settings.secret, user_id, runtime.settings.token_ttl)
    expires = time.time() + runtime.settings.token_ttl
    body = {"ok": True, "expires_at": int(expires * 1000), "time": int(time.time() * 1000)}
    return with_session(JSONResponse(body), request, runtime, token)
