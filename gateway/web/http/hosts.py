"""Which host a request may name (its Host header), and whether a browser's Origin is this node's own.

DNS rebinding: a page on `evil.example`, its name then pointed at 127.0.0.1, talks to a node on the victim's
machine as a same-origin page would: the browser sends `Host: evil.example:8765` and a matching Origin, so
an Origin check alone lets it sign in, act and open `/ws`. A node answers only for the names it is reached by
(`GATEWAY_HOSTS`): any other Host gets 421 before a route sees the request. And an Origin is ours only when
its scheme, host and port are the request's own: `https://` or `ftp://` with our host and port is another
origin.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from ...core.hosts import (  # noqa: F401  (callers read them from here too)
    DEFAULT_PORTS,
    LOOPBACK_NAMES,
    host_allowed,
    loopback_host,
    same_origin,
    split_host,
)


class HostCheck:
    """Refuse, with 421 and before any route, a request (or a websocket's upgrade) whose Host is not one of
    `allowed`: the answer a server gives a request that reached it under a name it does not serve."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or "*" in self.allowed:
            await self.app(scope, receive, send)
            return
        host = next((v for k, v in scope["headers"] if k == b"host"), b"").decode("latin-1")
        if host_allowed(host, self.allowed):
            await self.app(scope, receive, send)
            return
        refusal = JSONResponse(
            {"error": "misdirected", "message": "this server does not answer for that host name (GATEWAY_HOSTS)"},
            421,
        )
        if scope["type"] == "http":
            await refusal(scope, receive, send)
        elif "websocket.http.response" in scope.get("extensions", {}):
            await WebSocket(scope, receive, send).send_denial_response(refusal)
        else:  # an ASGI server without denial responses: the handshake is refused all the same
            await send({"type": "websocket.close", "code": 1008})
