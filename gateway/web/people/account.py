"""The account page's API: the signed-in person's teams and role in each, and where they are signed in (each
session's device and when it was last seen), with a revoke for each session that ends it on every node; and their
preferences (which finishes reach them), kept on the server so that they follow the person to another browser,
and announced to every node so that the person's open tabs follow a change at once."""

from __future__ import annotations

import logging
import time

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...bus.errors import BusError
from ...core.preferences import PreferencesChanged
from ...store import people
from ...store import sessions as stored
from ..http.answers import Account, Done, Named, Preferences, SessionRow, TeamRole, answer
from ..http.guards import Refused, claims, decode, endpoint, path_id, runtime_of, user
from .auth import TOKEN_COOKIE
from .session import DB_ERRORS, end_session, record_session

log = logging.getLogger(__name__)

SESSIONS_LISTED = 100
_preferences = msgspec.json.Decoder(Preferences)


@endpoint
async def account(request: Request) -> Response:
    user_id = user(request)
    found = claims(request)
    runtime = runtime_of(request)
    person = await people.user(runtime.pool, user_id)
    if person is None:
        raise Refused(401, "unauthorized", "unknown user")
    await record_session(request, runtime, found)  # this one is listed, seen now, whatever the node's last write
    teams = await people.memberships_of(runtime.pool, user_id)
    total, rows = await stored.active(runtime.pool, user_id, runtime.settings.session_max_age, SESSIONS_LISTED)
    sessions = [
        SessionRow(
            id=r.id,
            device=r.device or "Unknown",
            started_at=r.started_at.isoformat(),
            last_seen_at=r.last_seen_at.isoformat(),
            current=bool(found.token_id) and r.token_id == found.token_id,
        )
        for r in rows
    ]
    return answer(
        Account(
            user=Named(person.id, person.name),
            teams=[TeamRole(t.id, t.name, t.role) for t in teams],
            sessions=sessions,
            sessions_total=total,
            time=int(time.time() * 1000),
            preferences=Preferences(finishes=await people.finishes(runtime.pool, user_id)),
        )
    )


@endpoint
async def set_preferences(request: Request) -> Response:
    """The person's choice of which finishes reach them ("mine", "team" or "none"), for every browser of theirs:
    kept, then announced to every node, which tells the person's open sockets (their other tabs follow it now)."""
    user_id = user(request, acting=True)
    body = await decode(request, _preferences, limit=1024)
    runtime = runtime_of(request)
    try:
        await people.choose_finishes(runtime.pool, user_id, body.finishes)
    except DB_ERRORS:
        raise Refused(503, "unavailable", "the choice could not be kept now: try again") from None
    try:
        await runtime.broker.announcements.announce(PreferencesChanged(user_id, body.finishes))
    except BusError as exc:  # kept all the same: the other tabs read it at their next load
        log.warning("finishes chosen but not announced (%s): open tabs take it at their next load", exc)
    return answer(body)


@endpoint
async def revoke_session(request: Request) -> Response:
    """Ends one of the person's own sessions on every node; their current one signs this browser out too.
    Another person's session is refused like one that does not exist."""
    session_id = path_id(request)
    user_id = user(request, acting=True)
    found = claims(request)
    runtime = runtime_of(request)
    max_age = runtime.settings.session_max_age
    token_id = await stored.active_token(runtime.pool, user_id, session_id, max_age)
    if token_id is None:
        raise Refused(404, "not_found", f"no active session {session_id} of yours")
    try:
        await end_session(runtime, token_id)
    except DB_ERRORS:
        raise Refused(503, "unavailable", "the session could not be revoked now: try again") from None
    response = answer(Done())
    if token_id == found.token_id:
        response.delete_cookie(TOKEN_COOKIE, path="/")
    return response
