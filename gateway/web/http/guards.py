"""What every HTTP endpoint checks first, in one place: who calls, may they, and is the body well formed.

A check that fails raises `Refused`; `@endpoint` turns it into the JSON error the caller reads
(`{"error": code, "message": ...}`), so handlers read as the happy path.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import wraps
from typing import TypeVar
from urllib.parse import unquote

import msgspec
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import Response

from ...core import roles
from ...core.types import MAX_ID, is_id
from ...store import clusters, queries, tenants
from ...store.reads import TooSlow
from ...store.types import Pool
from ..node.logs import bind
from ..people.auth import TOKEN_COOKIE, Claims, InvalidToken, cluster_of_key, key_matches, read_token
from ..runtime import Runtime
from . import hosts
from .body import BodyTooLarge, read_body
from .refusals import Refused

T = TypeVar("T")


def endpoint(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    @wraps(handler)
    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except Refused as refused:
            return refused.response()
        except TooSlow:
            # A person's read cut at GATEWAY_STATEMENT_TIMEOUT (handlers that can say more say it themselves).
            return Refused(422, "too_broad", "this read took too long: narrow it").response()
        except ClientDisconnect:
            # Gone mid-body (or cut at the body deadline): nobody reads an answer, and it is no server error.
            return Response(status_code=400)

    return run


def path_id(request: HTTPConnection, name: str = "id") -> int:
    """A `{name:int}` path parameter that PostgreSQL can hold: Starlette's `int` takes any run of digits."""
    value: int = request.path_params[name]
    if not is_id(value):
        raise Refused(422, "invalid", f"{name}: expected an id from 1 to {MAX_ID}")
    return value


def runtime_of(request: HTTPConnection) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def token_of(request: HTTPConnection) -> str | None:
    """Authorization header, then `?token=`, then the browser's cookie."""
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return query_token(request) or request.cookies.get(TOKEN_COOKIE)


def query_token(request: HTTPConnection) -> str | None:
    """`?token=`, its name spelled exactly so: the log redaction knows that name, not `tok%65n`, which
    Starlette's query_params would decode to it."""
    for part in request.scope.get("query_string", b"").split(b"&"):
        name, sep, value = part.partition(b"=")
        if name == b"token" and sep:
            return unquote(value.decode("latin-1")) or None
    return None


def claims(request: HTTPConnection) -> Claims:
    """The signed-in session, checked once per request: its token is valid, its session younger than
    GATEWAY_SESSION_MAX_AGE and not revoked; an HTTP request also spends one of the user's rate."""
    found: Claims | None = getattr(request.state, "claims", None)
    if found is not None:
        return found
    runtime = runtime_of(request)
    try:
        found = verified(runtime, token_of(request))
    except InvalidToken as exc:
        raise Refused(401, "unauthorized", str(exc)) from None
    if request.scope["type"] == "http":  # websockets have their own limits (admission, messages per second)
        within_rate(request, ("user", found.user_id))
    request.state.claims = found
    if runtime.sessions is not None:  # the account page's "last seen" (written at most once a minute)
        runtime.sessions.seen(found, request.headers.get("user-agent", ""))
    return found


def verified(runtime: Runtime, token: str | None) -> Claims:
    """The session of a token that may be used now; raises InvalidToken saying why not."""
    if not token:
        raise InvalidToken("missing token")
    max_age = runtime.settings.session_max_age
    tokens = runtime.tokens
    found = tokens.read(token, max_age) if tokens is not None else read_token(runtime.settings.secret, token, max_age)
    if runtime.revocations is not None and runtime.revocations.revoked(found.user_id, found.token_id, found.started):
        raise InvalidToken("token revoked")
    return found


def session(request: HTTPConnection) -> tuple[int, float]:
    """(user id, when the token expires) of the signed-in user."""
    found = claims(request)
    return found.user_id, found.expires


def user(request: HTTPConnection, acting: bool = False) -> int:
    """The signed-in user; `acting` (a request that changes something) also checks a browser's Origin."""
    user_id, _ = session(request)
    if acting:
        same_origin(request)
    return user_id


def same_origin(
    request: HTTPConnection, required: bool = False, message: str = "this origin may not act on jobs"
) -> None:
    """A browser's request that changes something comes from our own pages, or an origin GATEWAY_ORIGINS lists.
    Tools send no Origin. `required` (signing in) refuses that too, the opaque `null`, and origins only the
    wildcard allows: whom a browser is signed in as is decided on our pages or ones listed by name."""
    origin = request.headers.get("origin")
    if origin is None and not required:
        return
    runtime = runtime_of(request)
    host = request.headers.get("host", "")
    if origin is None:
        allowed = False
    elif required:
        allowed = hosts.same_origin(origin, request.url.scheme, host) or origin.rstrip("/") in runtime.settings.origins
    else:
        allowed = runtime.origin_allowed(origin, request.url.scheme, host)
    if not allowed:
        raise Refused(403, "origin_not_allowed", message)


def within_rate(request: HTTPConnection, key: tuple[str, int]) -> None:
    """One request of a user's or a cluster's rate (GATEWAY_HTTP_RATE); past it, 429 with Retry-After."""
    limits = runtime_of(request).http_rate
    if limits is not None and (wait := limits.wait(key, time.monotonic())):
        raise Refused(
            429, "rate_limited", f"too many requests: at most {limits.rate:g} a second", retry_after=math.ceil(wait)
        )


async def member(request: Request, user_id: int, team_id: int, message: str = "not a member of this team") -> None:
    """The team the path names: one query whether the team exists or not."""
    if not await queries.is_member(runtime_of(request).pool, user_id, team_id):
        raise Refused(403, "forbidden", message)


async def may(request: Request, user_id: int, team_id: int, what: str) -> str:
    """The caller's role in the team when it may do `what` there (gateway.core.roles decides); 403 otherwise."""
    pool = runtime_of(request).pool
    role = await tenants.role_of(pool, team_id, user_id)
    if what == roles.MANAGE and not roles.may(role, what) and await tenants.is_platform_admin(pool, user_id):
        return "owner"  # a platform administrator manages every team as its owner would
    if role is None:
        raise Refused(403, "forbidden", "not a member of this team")
    if not roles.may(role, what):
        allowed = " and ".join(f"{r}s" for r in roles.ROLES if roles.may(r, what))
        raise Refused(403, "forbidden", f"only the team's {allowed} may {roles.WHAT[what]} (you are a {role})")
    return role


async def platform_admin(request: Request) -> int:
    """The signed-in user when they are a platform administrator (users.platform_admin); 403 otherwise."""
    user_id = user(request, acting=True)
    if not await tenants.is_platform_admin(runtime_of(request).pool, user_id):
        raise Refused(403, "forbidden", "only a platform administrator may manage teams and users")
    return user_id


MembersTeamOf = Callable[[Pool, int, int], Awaitable[int | None]]  # queries.members_team_of_*


async def members_team(request: Request, user_id: int, team_of: MembersTeamOf, row_id: int, message: str) -> int:
    """The team of the row the path names (a trajectory, an analysis), when the caller is one of its members.
    `team_of` answers only a member's team, so another team's row and a missing one take the same one query and
    get the same 403: neither the answer nor its time tells whether the row exists."""
    team_id = await team_of(runtime_of(request).pool, row_id, user_id)
    if team_id is None:
        raise Refused(403, "forbidden", message)
    return team_id


@dataclass(frozen=True)
class Cluster:
    id: int
    team_id: int


async def cluster(request: Request) -> Cluster:
    """The cluster behind `Authorization: Bearer <cluster key>` (its key is checked against the stored hash)."""
    auth = request.headers.get("authorization", "")
    key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    cluster_id = cluster_of_key(key)
    found = None
    if cluster_id is not None:
        found = await clusters.key_of(runtime_of(request).pool, cluster_id)
    if cluster_id is None or found is None or not key_matches(key, found.key_hash):
        raise Refused(401, "unauthorized", "a valid cluster key is required")
    within_rate(request, ("cluster", cluster_id))  # keyed by a checked key: nobody spends another's rate
    bind(cluster_id=cluster_id, team_id=found.team_id)  # the request's log lines say whose
    runtime = runtime_of(request)
    if runtime.hearing is not None:
        await runtime.hearing.heard(runtime.pool, cluster_id, found.silent)
    return Cluster(cluster_id, found.team_id)


async def decode(request: Request, decoder: msgspec.json.Decoder[T], limit: int | None = None) -> T:
    """The body, validated: 413 past the bound, 400 when not JSON, 422 naming the bad field."""
    runtime = runtime_of(request)
    try:
        return decoder.decode(await read_body(request, limit or runtime.settings.max_body_bytes))
    except BodyTooLarge as exc:
        raise Refused(413, "too_large", str(exc)) from None
    except msgspec.ValidationError as exc:
        raise Refused(422, "invalid", str(exc)) from None
    except msgspec.DecodeError as exc:
        raise Refused(400, "malformed", f"malformed JSON: {exc}") from None
