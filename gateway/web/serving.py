"""The uvicorn configuration a gateway node runs with (`gateway serve`, the demo and the test nodes share it), and
the server `gateway serve` runs it in (gateway.web.leaving: how the node leaves on SIGTERM)."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import uvicorn

from ..config import Settings

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from .leaving import NodeServer


# Seconds the connections and requests still open when the node stops (after the websockets' close frames) may
# take before uvicorn cancels them: a stop must end, whatever a peer or a request is waiting for.
GRACEFUL_SHUTDOWN = 15.0
BACKLOG = 2048  # uvicorn's own default: connections the kernel queues for accept() (capped by net.core.somaxconn)


def uvicorn_config(app: object, settings: Settings, host: str, port: int, **extra: object) -> uvicorn.Config:
    from .http import HttpLimits, bounded_protocol  # Starlette and httptools: only when a node starts

    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        loop="uvloop",
        # httptools, with bounds before the app sees a request, and the handshake's gate (a valid token, then
        # the admission: the app's, made with it by gateway.web.app.create_app) before any websocket work
        http=bounded_protocol(
            HttpLimits.from_settings(settings),
            getattr(getattr(app, "state", None), "handshakes", None),
            settings.health_port,
            settings.health_max_connections,
        ),
        ws="gateway.web.direct:DirectProtocol",  # uvicorn's sans-I/O protocol, plus the hand-over to the hub
        ws_max_size=settings.max_message_bytes,
        ws_per_message_deflate=settings.compression,  # negotiated by gateway.web.deflate: each frame deflated once
        lifespan="on",
        log_config=None,  # uvicorn's loggers go through ours: one format, secrets redacted
        **extra,  # type: ignore[arg-type]
    )


def node_server(app: Starlette, settings: Settings, host: str, port: int) -> NodeServer:
    """The server of `gateway serve` (and of each of its workers): `app` from gateway.web.app.create_app."""
    from .leaving import NodeServer

    config = uvicorn_config(app, settings, host, port, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN)
    return NodeServer(config, settings, app.state.leaving)


def listeners(
    host: str, port: int, health_host: str = "", health_port: int = 0, reuse_port: bool = False
) -> list[socket.socket]:
    """The node's listening sockets: its port, and with `health_port` a second one (on `health_host`, else
    `host`) whose accept queue is its own and which answers health and metrics only. A reconnect storm fills
    the first past what the kernel holds (it then drops the handshakes it cannot queue, and their clients try
    again a second later, then three); health checks and scrapes sent to the second are not behind it.
    `reuse_port`: other processes may bind the same addresses (`serve --workers`: the kernel spreads new
    connections over them)."""
    sockets = [_listening(host, port, reuse_port)]
    if health_port:
        sockets.append(_listening(health_host or host, health_port, reuse_port))
    return sockets


def _listening(host: str, port: int, reuse_port: bool) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(BACKLOG)
    sock.set_inheritable(True)
    return sock
