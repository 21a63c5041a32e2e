"""Whether a websocket handshake is taken: a person's session (Origin, token, the bus in reach, the per-user limit
on this node, then across nodes) or a cluster's key for its command feed; a refusal is the HTTP response to send.

The node's own handshake (gateway.web.websocket.opening) and the ASGI fallback (gateway.web.websocket.ws) both ask here.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse

from ...credentials import cluster_of_key, key_matches
from ...hub.errors import TRANSIENT
from ...store import clusters
from ..http.guards import Refused, claims, session, token_of
from ..runtime import Runtime


@dataclass(frozen=True)
class Admitted:
    user_id: int  # 0 for a cluster's feed
    expires: float
    cluster_id: int | None
    token_id: str  # the session's ("" for a cluster's feed)
    released: Callable[[], None]  # gives back the per-user slot claimed across nodes, once the socket is gone


async def admit_socket(request: HTTPConnection, runtime: Runtime) -> Admitted | JSONResponse:
    cluster_id = cluster_of_key(token_of(request) or "")
    admitted = await admit_cluster(request, runtime, cluster_id) if cluster_id else admit(request, runtime)
    if isinstance(admitted, JSONResponse):
        return admitted
    user_id, expires = admitted
    # The per-user limit across the node's workers and the other nodes (a cluster's feeds have their own, per node)
    held = None if cluster_id else runtime.sockets_held
    if held is not None and not await held.claim(user_id):
        return too_many_connections(runtime.settings.max_connections_per_user)
    released = _nothing if held is None else functools.partial(held.release, user_id)
    token_id = "" if cluster_id else claims(request).token_id
    return Admitted(user_id, expires, cluster_id, token_id, released)


def _nothing() -> None:
    pass


def admit(websocket: HTTPConnection, runtime: Runtime) -> tuple[int, float] | JSONResponse:
    """The session's user and expiry, or why this handshake is refused, as the HTTP response to send."""
    # Browsers always send Origin; tools usually do not.
    origin = websocket.headers.get("origin")
    if origin is not None and not runtime.origin_allowed(
        origin, websocket.url.scheme, websocket.headers.get("host", "")
    ):
        return JSONResponse({"error": "origin_not_allowed", "message": "this origin may not open the socket"}, 403)
    try:
        user_id, expires = session(websocket)
    except Refused as refused:
        return refused.response()
    if runtime.node.bus_out_of_reach:  # it could deliver nothing live: the client goes elsewhere, or comes back soon
        return _retry_later("unavailable", "this node cannot reach its bus: retry shortly", 1000, 2000)
    limit = runtime.settings.max_connections_per_user
    if runtime.node.per_user.get(user_id, 0) >= limit:  # over it on this node alone: no need to ask the bus
        return too_many_connections(limit)
    return user_id, expires


def too_many_connections(limit: int) -> JSONResponse:
    return JSONResponse({"error": "too_many_connections", "message": f"at most {limit} connections per user"}, 429)


async def admit_cluster(
    websocket: HTTPConnection, runtime: Runtime, cluster_id: int
) -> tuple[int, float] | JSONResponse:
    """A cluster's feed: its key checked against the stored hash; it follows its own commands' channel only."""
    origin = websocket.headers.get("origin")
    if origin is not None:  # a cluster is no browser: a page may not open a feed with a key it was handed
        return JSONResponse({"error": "origin_not_allowed", "message": "a cluster's feed takes no Origin"}, 403)
    try:
        found = await clusters.key_of(runtime.pool, cluster_id)
    except TRANSIENT:
        return _retry_later("unavailable", "the database is unavailable: retry shortly", 1000, 2000)
    if found is None or not key_matches(token_of(websocket) or "", found.key_hash):
        return JSONResponse({"error": "unauthorized", "message": "a valid cluster key is required"}, 401)
    if runtime.node.bus_out_of_reach:
        return _retry_later("unavailable", "this node cannot reach its bus: retry shortly", 1000, 2000)
    limit = runtime.settings.max_connections_per_user
    if runtime.node.per_cluster.get(cluster_id, 0) >= limit:
        return JSONResponse(
            {"error": "too_many_connections", "message": f"at most {limit} connections per cluster"}, 429
        )
    return 0, math.inf  # no person: user 0; a key does not expire


def _retry_later(error: str, message: str, least_ms: int, spread_ms: int) -> JSONResponse:
    """503 with a retry hint jittered over `spread_ms` past `least_ms`, so refused clients do not return together."""
    retry_ms = int(least_ms + spread_ms * random.random())
    return JSONResponse(
        {"error": error, "message": message, "retry_after_ms": retry_ms},
        503,
        headers={"Retry-After": str(max(1, round(retry_ms / 1000)))},
    )
