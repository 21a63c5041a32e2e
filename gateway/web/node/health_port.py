"""The health port (GATEWAY_HEALTH_PORT) answers health and metrics only.

It is there so the load balancer's checks and Prometheus' scrapes are not queued behind a reconnect storm, and
it is bound where only they reach: the rest of the app (the API, the pages, the websocket) answers 404 there,
so nothing a client does can arrive through it. The HTTP protocol refuses a websocket upgrade there before
any websocket work (gateway.web.server.http11); `HealthPortOnly` covers every HTTP request.

A node serves the port from a thread of its own (gateway.web.server.own_thread), where `HealthFirst` answers
`/healthz` from what the node holds and how lately its loop last ran: a storm that keeps the loop busy for
hundreds of milliseconds does not hold the liveness check back, and a loop that has not run for `STALLED`
seconds is said to be stuck (503), as a check that timed out would have said. `/readyz` and `/metrics` read
PostgreSQL, Redis and the node's figures: they are answered on the node's loop, and wait as the node does.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import TYPE_CHECKING, Any

from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ...config import WORKER_ENV
from ..http.headers import SecurityHeaders
from ..http.hosts import HostCheck
from ..server.own_thread import OnLoop
from .logs import RequestTimer

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..runtime import Runtime

HEALTH_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
STALLED = 5.0  # seconds without a turn of the node's loop before /healthz says it is stuck (a probe's timeout)


def liveness(runtime: Runtime) -> tuple[dict[str, object], int]:
    """/healthz's answer and status: what the node holds, and whether its loop still runs."""
    answer: dict[str, object] = {
        "ok": True,
        "connections": len(runtime.node.connections),
        "channels": len(runtime.node.hub.subscribers),
    }
    worker = os.environ.get(WORKER_ENV)
    if worker is not None:  # `serve --workers N`: which of them answered
        answer["worker"] = int(worker)
    lag = runtime.loop_lag
    still = time.monotonic() - lag.ticked if lag is not None and lag.ticked is not None else 0.0
    if still > STALLED:
        answer["ok"] = False
        answer["problem"] = f"the event loop has not run for {still:.1f} s"
        return answer, 503
    return answer, 200


class HealthFirst:
    """The health port's app on its own thread: `/healthz` answered there, with the app's headers, host check and
    figures; the rest on the node's loop (`loop`), by the app itself."""

    def __init__(self, app: Starlette, loop: asyncio.AbstractEventLoop, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.elsewhere = OnLoop(app, loop)
        self.route = next(r for r in app.routes if isinstance(r, Route) and r.path == "/healthz")
        figures = getattr(app.state, "http_figures", None)
        counted = None if figures is None else _CountedOn(figures, loop)
        self.here = RequestTimer(SecurityHeaders(HostCheck(self._healthz, allowed)), counted)  # type: ignore[arg-type]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/healthz" and scope["method"] in ("GET", "HEAD"):
            scope["route"] = self.route  # the figures' label, as the app's routing would note it
            await self.here(scope, receive, send)
        else:
            await self.elsewhere(scope, receive, send)

    async def _healthz(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer, status = liveness(self.app.state.runtime)
        await JSONResponse(answer, status)(scope, receive, send)


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
