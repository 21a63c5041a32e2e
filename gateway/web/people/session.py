"""Signing in the browser: a token in the URL becomes an HttpOnly cookie once the user confirms whom it signs in as
(gateway.web.people.confirm); demo mode has a user picker. Renewals keep the session, never past its maximum age;
signing out revokes it. Each session is recorded with its device for the account page (gateway.web.people.account)."""

from __future__ import annotations

import logging
import time
from urllib.parse import parse_qs

import msgspec
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response

from ...core.device import device_of
from ...core.sessions import Seen
from ...core.types import MAX_ID, Id
from ...credentials import Claims
from ...hub.revocations import revoke
from ...resources import INDEX
from ...store import people, queries
from ...store import sessions as stored_sessions
from ...store.errors import STORE_UNAVAILABLE
from ..http.answers import Done, Named, Renewed, Users, answer
from ..http.body import BodyTooLarge, read_body
from ..http.guards import Refused, claims, endpoint, query_token, runtime_of, same_origin, token_of, user, verified
from ..runtime import Runtime
from .auth import TOKEN_COOKIE, InvalidToken, issue_token, read_token
from .confirm import confirmation_page, page

log = logging.getLogger(__name__)

NO_STORE = {"Cache-Control": "no-store"}
MAX_FORM_BYTES = 16 << 10
DB_ERRORS = STORE_UNAVAILABLE


class SignIn(msgspec.Struct):
    user_id: Id


# Lax: the picker's user id may come as a string of digits, as it always could.
_sign_in_decoder = msgspec.json.Decoder(SignIn, strict=False)


def with_session(
    response: Response, request: Request, runtime: Runtime, token: str, expires: float | None = None
) -> Response:
    response.set_cookie(
        TOKEN_COOKIE,
        token,
        max_age=runtime.settings.token_ttl if expires is None else max(0, int(expires - time.time())),
        httponly=True,  # no script can read it
        samesite="strict",  # no other site's page sends it
        # https: TLS here, or a proxy's X-Forwarded-Proto that the node trusts (FORWARDED_ALLOW_IPS)
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


async def record_session(request: Request, runtime: Runtime, found: Claims) -> None:
    """The session is listed on the account page from now on, with this browser's device."""
    if not found.token_id:
        return  # a token from before sessions had ids: nothing names it
    device = device_of(request.headers.get("user-agent", ""))
    seen = Seen(found.token_id, found.user_id, found.started, found.expires, device)
    try:
        await stored_sessions.record(runtime.pool, [seen])
    except DB_ERRORS as exc:  # the sign-in holds all the same; the node's next write lists it
        log.warning("recording a session failed: %s", type(exc).__name__)
        if runtime.sessions is not None:
            runtime.sessions.seen(found, request.headers.get("user-agent", ""))


async def end_session(runtime: Runtime, token_id: str) -> None:
    """Revoke a session on every node, as `gateway revoke --token-id` does (its sockets close with 4001), and
    take it off the account page."""
    if runtime.revocations is None:
        return
    runtime.revocations.apply(
        await revoke(runtime.pool, runtime.broker.announcements, runtime.settings.session_max_age, token_id=token_id)
    )
    await stored_sessions.forget(runtime.pool, token_id)


async def index(request: Request) -> Response:
    """The app. `/?token=...` asks whom to sign in as first: the link alone sets no cookie."""
    runtime = runtime_of(request)
    token = query_token(request)
    if token is None:
        return FileResponse(INDEX, headers=NO_STORE)
    try:
        user_id = verified(runtime, token).user_id
    except InvalidToken:
        return RedirectResponse("/?signin=expired", status_code=303)
    name = await people.user_name(runtime.pool, user_id)
    if name is None:
        return RedirectResponse("/?signin=expired", status_code=303)
    return HTMLResponse(confirmation_page(name, token, request.url.path), headers=NO_STORE)


@endpoint
async def confirm_sign_in(request: Request) -> Response:
    """The confirmation page's button (`POST /sign-in`, a form): the token becomes the session cookie."""
    same_origin(request, required=True, message="sign in from this gateway's own page")
    runtime = runtime_of(request)
    try:
        form = parse_qs((await read_body(request, MAX_FORM_BYTES)).decode("utf-8", "replace"))
    except BodyTooLarge as exc:
        raise Refused(413, "too_large", str(exc)) from None
    token = form.get("token", [""])[0]
    try:
        found = verified(runtime, token)
    except InvalidToken:
        return RedirectResponse("/?signin=expired", status_code=303)
    redirect = RedirectResponse(page(form.get("next", ["/"])[0]), status_code=303)
    await record_session(request, runtime, found)
    return with_session(redirect, request, runtime, token, found.expires)


async def demo_users(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    if not runtime.settings.demo:
        return JSONResponse({"error": "not_found", "message": "no user picker outside demo mode"}, 404)
    rows = await people.users(runtime.pool)
    return answer(Users([Named(r.id, r.name) for r in rows]))


@endpoint
async def demo_sign_in(request: Request) -> Response:
    same_origin(request)  # no other site signs a browser in
    runtime: Runtime = request.app.state.runtime
    if not runtime.settings.demo:
        return JSONResponse({"error": "not_found", "message": "no user picker outside demo mode"}, 404)
    try:
        user_id = _sign_in_decoder.decode(await request.body()).user_id
    except (msgspec.ValidationError, msgspec.DecodeError):
        return JSONResponse({"error": "invalid", "message": f"user_id: expected an id from 1 to {MAX_ID}"}, 422)
    if not await queries.user_exists(runtime.pool, user_id):
        return JSONResponse({"error": "invalid", "message": f"user_id: no user {user_id}"}, 422)
    token = issue_token(runtime.settings.secret, user_id, runtime.settings.token_ttl)
    await record_session(request, runtime, read_token(runtime.settings.secret, token))
    return with_session(answer(Done()), request, runtime, token)


@endpoint
async def sign_out(request: Request) -> Response:
    """Clears the cookie and revokes the session it held, on every node (its other tabs' sockets close)."""
    same_origin(request)
    runtime = runtime_of(request)
    try:
        found = verified(runtime, token_of(request))
    except InvalidToken:
        found = None  # nothing to revoke
    if found is not None and found.token_id:  # older tokens just lose the cookie
        try:
            await end_session(runtime, found.token_id)
        except DB_ERRORS as exc:  # the cookie goes anyway
            log.warning("sign-out: revoking the session failed: %s", type(exc).__name__)
    response = answer(Done())
    response.delete_cookie(TOKEN_COOKIE, path="/")
    return response


@endpoint
async def renew(request: Request) -> Response:
    """A session about to expire gets a new cookie without a reload (the current token must still be valid):
    the same session (its id and start), never past GATEWAY_SESSION_MAX_AGE from its start."""
    runtime = runtime_of(request)
    settings = runtime.settings
    user(request, acting=True)
    found = claims(request)
    now = int(time.time())  # whole seconds, as the token counts them
    expires = int(min(now + settings.token_ttl, found.started + settings.session_max_age))
    token = issue_token(
        settings.secret, found.user_id, expires - now, now, token_id=found.token_id, started=found.started
    )
    body = Renewed(ok=True, expires_at=expires * 1000, time=int(time.time() * 1000))
    await record_session(request, runtime, read_token(settings.secret, token))  # its new expiry
    return with_session(answer(body), request, runtime, token, expires)
