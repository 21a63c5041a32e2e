"""The health port (GATEWAY_HEALTH_PORT) answers health and metrics only.

It is there so the load balancer's checks and Prometheus' scrapes are not queued behind a reconnect storm, and
it is bound where only they reach: the rest of the app (the API, the pages, the websocket) answers 404 there,
so nothing a client does can arrive through it. The HTTP protocol refuses a websocket upgrade there before
any websocket work (gateway.web.server.http11); `HealthPortOnly` covers every HTTP request.

A node serves the port from a thread of its own (gateway.web.server.own_thread), where `HealthFirst` answers
`/healthz` from what the node holds and how lately its loop last ran: a storm that keeps the loop busy for
hundreds of milliseconds does not hold the liveness check back, and a loop that has not run for
`gateway.web.node.metrics.STALLED` seconds is said to be stuck (503), as a check that timed out would have said.
`/readyz` reads PostgreSQL and Redis: the node checks them on its loop every second, and the thread answers ready
from that check while it is under three seconds old and found nothing wrong; otherwise (a problem, or no recent
check) it hands the request to the node's loop, as `/metrics` always.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..http.headers import SecurityHeaders
from ..http.hosts import HostCheck
from ..server.own_thread import OnLoop
from .logs import RequestTimer
from .metrics import Readiness, liveness, readiness

if TYPE_CHECKING:
    from starlette.applications import Starlette

HEALTH_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
ANSWERED_HERE = ("/healthz", "/readyz")


class HealthFirst:
    """The health port's app on its own thread: `/healthz`, and `/readyz` from the node's last check while it is
    fresh and found it ready (gateway.web.node.metrics.Readiness), answered there with the app's headers, host check and figures; the
    rest on the node's loop (`loop`), by the app itself."""

    def __init__(self, app: Starlette, loop: asyncio.AbstractEventLoop, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.elsewhere = OnLoop(app, loop)
        self.routes = {r.path: r for r in app.routes if isinstance(r, Route) and r.path in ANSWERED_HERE}
        figures = getattr(app.state, "http_figures", None)
        counted = None if figures is None else _CountedOn(figures, loop)
        self.here = RequestTimer(SecurityHeaders(HostCheck(self._answer, allowed)), counted)  # type: ignore[arg-type]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD") and scope["path"] in self.routes:
            path = scope["path"]
            if path == "/healthz" or self._ready_here():
                scope["route"] = self.routes[path]  # the figures' label, as the app's routing would note it
                await self.here(scope, receive, send)
                return
        await self.elsewhere(scope, receive, send)

    def _ready_here(self) -> bool:
        """Whether /readyz can be answered here: the node is leaving, or its last check is fresh and found it ready
        (a problem is asked again on the node's loop: a node is never held out by a check a second old)."""
        leaving = getattr(self.app.state, "leaving", None)
        checks: Readiness | None = getattr(self.app.state, "readiness", None)
        return (leaving is not None and leaving.since is not None) or (checks is not None and checks.ready_lately())

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = self.app.state
        if scope["path"] == "/healthz":
            answer, status = liveness(state.runtime)
            response = JSONResponse(answer, status)
        else:
            response = readiness(getattr(state, "leaving", None), [])
        await response(scope, receive, send)


class _CountedOn:
    """The app's request figures, kept by the node's loop alone: observed there."""

    def __init__(self, figures: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.figures = figures
        self.loop = loop

    def observe(self, scope: Scope, status: int, seconds: float) -> None:
        label = {"route": scope.get("route"), "method": scope.get("method")}
        self.loop.call_soon_threadsafe(self.figures.observe, label, status, seconds)


class HealthPortOnly:
    def __init__(self, app: ASGIApp, port: int) -> None:
        self.app = app
        self.port = port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.port and scope["type"] == "http" and scope["path"] not in HEALTH_PATHS and _port(scope) == self.port:
            message = "the health port serves /healthz, /readyz and /metrics only"
            await JSONResponse({"error": "not_found", "message": message}, 404)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _port(scope: Scope) -> int | None:
    server = scope.get("server")  # the local address the request came in on
    return server[1] if server else None
