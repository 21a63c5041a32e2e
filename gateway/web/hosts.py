"""Which host a request may name (its Host header), and whether a browser's Origin is this node's own.

DNS rebinding: a page on `evil.example`, its name then pointed at 127.0.0.1, talks to a node on the victim's
machine as a same-origin page would: the browser sends `Host: evil.example:8765` and a matching Origin, so
an Origin check alone lets it sign in, act and open `/ws`. A node answers only for the names it is reached by
(`GATEWAY_HOSTS`): any other Host gets 421 before a route sees the request. And an Origin is ours only when
its scheme, host and port are the request's own: `https://` or `ftp://` with our host and port is another
origin.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
DEFAULT_PORTS = {"http": 80, "https": 443}
_HTTP_SCHEME = {"http": "http", "ws": "http", "https": "https", "wss": "https"}


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header's (or a netloc's) name, lowercased, and its port; None when it is not one."""
    value = value.strip().lower()
    if value.startswith("["):  # an IPv6 literal keeps its brackets: "[::1]:8765"
        name, bracket, rest = value.partition("]")
        if not bracket:
            return None
        name, port_text = name + "]", rest[1:] if rest.startswith(":") else None
        if rest and port_text is None:
            return None
    else:
        name, colon, port_text = value.partition(":")
        if not colon:
            port_text = None
    if not name or any(c in name for c in "/@ \\"):
        return None
    if port_text is None:
        return name, None
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


def host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Whether a request naming `host` is for this node: its name is one of `allowed` ("*": any)."""
    if "*" in allowed:
        return True
    parsed = split_host(host)
    return parsed is not None and parsed[0] in allowed


def loopback_host(host: str) -> bool:
    """Whether the Host header names this machine's loopback (what a scraper on the node's host sends)."""
    parsed = split_host(host)
    return parsed is not None and parsed[0] in LOOPBACK_NAMES


def same_origin(origin: str, scheme: str, host: str) -> bool:
    """Whether a browser's Origin is the request's own origin: scheme, host and port (ports by default too).
    `scheme` is the request's (ws and wss are http and https here)."""
    parts = urlsplit(origin)
    origin_scheme = parts.scheme.lower()
    if origin_scheme not in DEFAULT_PORTS or origin_scheme != _HTTP_SCHEME.get(scheme):
        return False
    theirs, ours = split_host(parts.netloc), split_host(host)
    if theirs is None or ours is None:
        return False
    default = DEFAULT_PORTS[origin_scheme]
    return theirs[0] == ours[0] and (theirs[1] or default) == (ours[1] or default)


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
