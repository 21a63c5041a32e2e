"""What every HTTP endpoint checks first, in one place: who calls, may they, and is the body well formed.

A check that fails raises `Refused`; `@endpoint` turns it into the JSON error the caller reads
(`{"error": code, "message": ...}`), so handlers read as the happy path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import wraps
from typing import TypeVar

import msgspec
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response

from ..store import queries
from .auth import TOKEN_COOKIE, InvalidToken, cluster_of_key, key_matches, token_session
from .body import BodyTooLarge, read_body
from .runtime import Runtime

T = TypeVar("T")


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def response(self) -> JSONResponse:
        return JSONResponse({"error": self.code, "message": self.message}, self.status)


def endpoint(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    @wraps(handler)
    async def run(request: Request) -> Response:
        try:
            return await handler(request)
        except Refused as refused:
            return refused.response()

    return run


def runtime_of(request: HTTPConnection) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def token_of(request: HTTPConnection) -> str | None:
    """Authorization header, then `?token=`, then the browser's cookie."""
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.query_params.get("token") or request.cookies.get(TOKEN_COOKIE)


def session(request: HTTPConnection) -> tuple[int, float]:
    """(user id, when the token expires) of the signed-in user."""
    token = token_of(request)
    try:
        if not token:
            raise InvalidToken("missing token")
        return token_session(runtime_of(request).settings.secret, token)
    except InvalidToken as exc:
        raise Refused(401, "unauthorized", str(exc)) from None


def user(request: HTTPConnection, acting: bool = False) -> int:
    """The signed-in user; `acting` (a request that changes something) also checks a browser's Origin."""
    runtime = runtime_of(request)
    user_id, _ = session(request)
    origin = request.headers.get("origin")
    if acting and origin is not None and not runtime.origin_allowed(origin, request.headers.get("host", "")):
        raise Refused(403, "origin_not_allowed", "this origin may not act on jobs")
    return user_id


async def member(request: Request, user_id: int, team_id: int | None, message: str = "not a member of this team") -> None:
    if team_id is None or not await queries.is_member(runtime_of(request).pool, user_id, team_id):
        raise Refused(403, "forbidden", message)


@dataclass(frozen=True)
class Cluster:
    id: int
    team_id: int


async def cluster(request: Request) -> Cluster:
    """The cluster behind `Authorization: Bearer <cluster key>` (its key is checked against the stored hash)."""
    auth = request.headers.get("authorization", "")
    key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    cluster_id = cluster_of_key(key)
    row = None
    if cluster_id is not None:
        row = await runtime_of(request).pool.fetchrow("select team_id, key_hash from clusters where id = $1", cluster_id)
    if cluster_id is None or row is None or not key_matches(key, row["key_hash"]):
        raise Refused(401, "unauthorized", "a valid cluster key is required")
    return Cluster(cluster_id, row["team_id"])


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
