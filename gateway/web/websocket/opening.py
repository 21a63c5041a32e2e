"""The node's answer to a websocket handshake, outside ASGI: the socket layer (gateway.web.server) has parsed the
upgrade once and passed the gate (a valid token, then the admission); here the Host is checked, the session or the
cluster's key admitted (gateway.web.websocket.socket_admission), then the 101 is sent and the socket handed to the hub
as a `DirectLink`, or the refusal is answered. No middleware, routing, ASGI task or queue runs for it.

Each handshake counts once in `gateway_http_requests_total` (route `/ws`), at its answer, as under ASGI.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.applications import Starlette
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse

from ...core.hosts import host_allowed
from ...core.protocol import MSGPACK_SUBPROTOCOL, Format
from ..runtime import Runtime
from ..server.served import Opener
from ..server.upgrade import Gone, Opening
from .socket_admission import admit_socket
from .ws import begin, budget

MISDIRECTED = b'{"error":"misdirected","message":"this server does not answer for that host name (GATEWAY_HOSTS)"}'
_SET_BY_THE_SERVER = frozenset({b"content-length", b"content-type"})


def opener(app: Starlette, hosts: tuple[str, ...]) -> Opener:
    """The node's opener for `app` (gateway.web.app.create_app) answering for `hosts` (GATEWAY_HOSTS)."""
    route = next((r for r in app.routes if getattr(r, "path", None) == "/ws"), None)
    figures = app.state.http_figures

    async def open_socket(opening: Opening) -> None:
        started = time.perf_counter()
        opening.scope["route"] = route  # the figures' label, as Starlette's routing would note it
        status = 500
        try:
            status = await _open(opening, app.state.runtime, hosts)
        finally:
            figures.observe(opening.scope, status, time.perf_counter() - started)

    return open_socket


async def _open(opening: Opening, runtime: Runtime, hosts: tuple[str, ...]) -> int:
    """Refuse or accept `opening`; the status answered (101 when accepted)."""
    request = HTTPConnection(opening.scope)
    if "*" not in hosts and not host_allowed(request.headers.get("host", ""), hosts):
        opening.refuse(421, MISDIRECTED)
        return 421
    admitted = await admit_socket(request, runtime)
    if isinstance(admitted, JSONResponse):
        _refuse(opening, admitted)
        return admitted.status_code
    fmt: Format = "msgpack" if opening.subprotocol == MSGPACK_SUBPROTOCOL else "json"
    conn, client = begin(runtime, admitted, fmt)
    settings = runtime.settings
    try:
        conn.link = opening.accept(
            client.on_message, client.end, conn, client.on_ping, budget(settings), settings.message_timeout
        )
    except Gone:
        client.end()
        return 101
    conn.flush()  # answers to what the client sent before its answer, then the hub's shortcut
    return 101


def _refuse(opening: Opening, response: JSONResponse) -> None:
    headers: list[Any] = [(k, v) for k, v in response.raw_headers if k not in _SET_BY_THE_SERVER]
    opening.refuse(response.status_code, bytes(response.body), headers)
