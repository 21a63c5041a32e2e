"""How a gateway node serves (`gateway serve`, each of its `--workers`, the demo and the test nodes): its own socket
layer (gateway.web.server) with the node's bounds, its websocket handshakes answered outside ASGI
(gateway.web.websocket.opening), its way of leaving on SIGTERM (gateway.web.node.leaving), on the sockets `listeners`
binds."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

from ..config import Settings
from .server.serve import BACKLOG, GRACEFUL_SHUTDOWN, Server, served_for

if TYPE_CHECKING:
    from starlette.applications import Starlette


def node_server(
    app: Starlette, settings: Settings, signals: bool = True, graceful_shutdown: float = GRACEFUL_SHUTDOWN
) -> Server:
    """The server of `app` (from gateway.web.app.create_app): SIGTERM drains it first (GATEWAY_DRAIN_SECONDS),
    then its websockets close with 1012 and retry hints spread at a quarter of the admission rate; `signals`
    False: the caller stops it (`stop()`), as the demo does."""
    from .node.health_port import HealthFirst
    from .websocket.opening import opener

    served = served_for(app, settings, opener(app, settings.hosts))
    if settings.health_port:  # answered from a thread of its own (gateway.web.node.health_port)
        served.health_app = lambda loop: HealthFirst(app, loop, settings.hosts)
    return Server(
        served,
        leaving=app.state.leaving,
        drain=settings.drain_seconds,
        # A quarter of what a node admits: what one here resumes while it carries the load, with the drained
        # node back (in about 5 s) for the later part of the window (docs/reliability.md, "Rolling deploys").
        reconnect_rate=settings.admission_rate / 4,
        longest_spread=settings.restart_spread,
        graceful_shutdown=graceful_shutdown,
        signals=signals,
    )


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
