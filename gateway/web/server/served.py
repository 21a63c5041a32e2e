"""What one server's connections share: its app and its bounds, the counts the bounds keep, and what is open."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .limits import HttpLimits, Waiting
from .proxy import Proxies

if TYPE_CHECKING:
    from ..websocket.handshake_gate import HandshakeGate

# The node's code for one websocket handshake the gate let through (a gateway.web.server.upgrade.Opening, which
# holds what this module names: so not named here): it refuses it, or accepts it and takes the link
# (gateway.web.websocket.opening). The server closes the socket if it does neither.
Opener = Callable[[Any], Awaitable[None]]


@dataclass
class Served:
    app: Any  # the ASGI app: every plain HTTP request
    opener: Opener | None = None  # websocket handshakes on `ws_path`; None: the node takes none (404)
    limits: HttpLimits = field(default_factory=HttpLimits)
    gate: HandshakeGate | None = None  # a valid token, then the admission, before any websocket work
    health_port: int = 0
    health_limit: int = 32
    # The health port's app, served from a thread of its own (gateway.web.server.own_thread), made with the node's
    # loop to hand there what it cannot answer alone; None: the health port is served on the node's loop.
    health_app: Callable[[asyncio.AbstractEventLoop], Any] | None = None
    ws_path: str = "/ws"
    max_message_bytes: int = 1 << 20
    compression: bool = False  # permessage-deflate, negotiated by gateway.web.websocket.deflate
    proxy: Proxies = field(default_factory=Proxies)
    default_headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    access_log: bool = True  # a line per request (gateway.access)
    state: dict[str, Any] = field(default_factory=dict)  # the app's lifespan state, copied into every scope
    waiting: Waiting = field(default_factory=Waiting)  # connections waiting for a request's headers
    health_open: Waiting = field(default_factory=Waiting)  # connections open on the health port
    connections: set[Any] = field(default_factory=set)  # HTTP connections (gateway.web.server.http11)
    links: set[Any] = field(default_factory=set)  # websockets handed over (gateway.web.websocket.direct.DirectLink)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)  # requests and handshakes being answered
    answerer: Any = None  # the handshakes answered per form, by websockets first (gateway.web.server.handshake)
    client_gone: Callable[[], None] | None = None  # a request's client left before its answer was complete
    stopping: bool = False  # no more keep-alive: each connection closes after its answer

    async def wind_down(self, grace: float) -> None:
        """The end of what is open, the listening sockets closed: an idle connection closes now, the requests being
        answered and the websockets' closes get `grace` seconds, then whatever is still open is cut."""
        for protocol in list(self.connections):
            protocol.shutdown()
        deadline = time.monotonic() + grace
        while (self.connections or self.links or self.tasks) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # polled: what is open closes on its own clock (a peer's close frame)
        for connection in [*self.connections, *self.links]:
            connection.transport.abort()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=grace)
