"""The health port (GATEWAY_HEALTH_PORT) answers health and metrics only.

It is there so the load balancer's checks and Prometheus' scrapes are not queued behind a reconnect storm, and
it is bound where only they reach: the rest of the app (the API, the pages, the websocket) answers 404 there,
so nothing a client does can arrive through it. The HTTP protocol refuses a websocket upgrade there before
any websocket work (gateway.web.server.http11); this middleware covers every HTTP request.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

HEALTH_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


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
