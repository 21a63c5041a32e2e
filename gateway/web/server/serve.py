"""The node's server: its listening sockets served by gateway.web.server.http11 on uvloop, its app started
first and shut down last, and its way of leaving (gateway.web.node.leaving has the why):

SIGTERM on a started node starts the drain: `Leaving.since` is set (/readyz answers 503) and the node serves
on for `GATEWAY_DRAIN_SECONDS`, then stops. A second SIGTERM, SIGINT, or no drain: it stops at once. Stopping
closes the listening sockets, closes every websocket with 1012 and a retry hint spread over a window, lets
the requests being answered finish (an idle kept-alive connection closes at once), and after
`graceful_shutdown` seconds cuts whatever is still open; then the app shuts down. Once done, the signal that
stopped it is raised again, so the process ends the way its handler for that signal says (`gateway serve`:
status 0).

With `Served.health_app`, the health port is served from a thread of its own (gateway.web.server.own_thread): it
answers through the drain and the stop, and closes last, just before the app shuts down.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import signal
import socket
import time
from typing import Any

from ...config import Settings
from ...core.restart import RESTART_CODE, restart_reason, spread, spread_window
from .http11 import HttpProtocol
from .lifespan import Lifespan, StartupFailed
from .limits import HttpLimits
from .own_thread import ThreadServer, served_apart
from .served import Opener, Served

log = logging.getLogger("gateway")

GRACEFUL_SHUTDOWN = 15.0  # seconds open connections and requests get, once the websockets' close frames are out
BACKLOG = 2048  # connections the kernel queues for accept() (capped by net.core.somaxconn)


def served_for(app: Any, settings: Settings, opener: Opener | None = None) -> Served:
    """What a node's connections share: `app` from gateway.web.app.create_app (its handshake gate in
    `app.state.handshakes`), `opener` the node's code for each websocket handshake."""
    state = getattr(app, "state", None)
    figures = getattr(state, "http_figures", None)  # gateway.web.node.http_figures: counts the clients gone
    return Served(
        app=app,
        opener=opener,
        limits=HttpLimits.from_settings(settings),
        gate=getattr(state, "handshakes", None),
        health_port=settings.health_port,
        health_limit=settings.health_max_connections,
        max_message_bytes=settings.max_message_bytes,
        compression=settings.compression,
        client_gone=getattr(figures, "client_gone", None),
    )


class Server:
    """Serves `served` on the sockets given to `run`; with `settings`, a node's drain and retry hints."""

    def __init__(
        self,
        served: Served,
        leaving: Any = None,
        drain: float = 0.0,
        reconnect_rate: float = 1000.0,
        longest_spread: float = 30.0,
        graceful_shutdown: float = GRACEFUL_SHUTDOWN,
        signals: bool = True,
    ) -> None:
        self.served = served
        self.signals = signals  # False: the caller stops it (`stop()`); SIGTERM and SIGINT are the process's
        self.leaving = leaving  # gateway.web.node.leaving.Leaving: `since` set once the node is on its way out
        self.drain = drain
        self.reconnect_rate = reconnect_rate
        self.longest_spread = longest_spread
        self.graceful_shutdown = graceful_shutdown
        self.started = False
        self.stop_asked: asyncio.Event | None = None
        self.stopped_by: int | None = None
        self.servers: list[asyncio.AbstractServer] = []
        self.apart: ThreadServer | None = None  # the health port's, on a thread of its own
        self._drain_timer: asyncio.TimerHandle | None = None
        self._date: asyncio.TimerHandle | None = None

    # -- running

    def run(self, sockets: list[socket.socket]) -> None:
        """Serve until stopped; then raise the stopping signal again (see the module's docstring)."""
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(self.serve(sockets))
        if self.stopped_by is not None:
            signal.raise_signal(self.stopped_by)

    async def serve(self, sockets: list[socket.socket]) -> None:
        loop = asyncio.get_running_loop()
        self.stop_asked = asyncio.Event()
        lifespan = Lifespan(self.served.app, self.served.state)
        try:
            await lifespan.startup()
        except StartupFailed as failed:
            log.error("the app did not start: %s", failed)
            return  # `started` stays False: the caller says so
        self._tick_date()
        before = {sig: signal.getsignal(sig) for sig in self._signals()}
        try:
            apart = [sock for sock in sockets if self._apart(sock)]
            if apart:
                health_app = self.served.health_app
                assert health_app is not None
                self.apart = ThreadServer(served_apart(self.served, health_app(loop), loop))
                self.apart.start(apart, BACKLOG)
            for sock in sockets:
                if sock in apart:
                    continue
                server = await loop.create_server(lambda: HttpProtocol(self.served), sock=sock, backlog=BACKLOG)
                self.servers.append(server)
            for sig in self._signals():
                loop.add_signal_handler(sig, self.handle_signal, sig)
            self.started = True
            log.info("serving on %s", ", ".join(_url(sock) for sock in sockets))
            await self.stop_asked.wait()
            await self.shutdown()
        finally:
            for sig, handler in before.items():
                loop.remove_signal_handler(sig)
                signal.signal(sig, handler)  # the process's own again: `run` raises the stopping signal to it
            if self._date is not None:
                self._date.cancel()
            if self.apart is not None:  # before the app shuts down: it hands the node's loop what it cannot answer
                await self.apart.stop(grace=1.0)
            await lifespan.shutdown()
        log.info("stopped: every connection closed and the app shut down")  # a service manager's last line

    def _apart(self, sock: socket.socket) -> bool:
        """Whether `sock` is the health port, served from a thread of its own."""
        served = self.served
        return bool(served.health_port and served.health_app) and sock.getsockname()[1] == served.health_port

    def _signals(self) -> tuple[int, ...]:
        return (signal.SIGTERM, signal.SIGINT) if self.signals else ()

    def handle_signal(self, sig: int) -> None:
        """SIGTERM on a started node starts the drain; anything else stops now."""
        if sig == signal.SIGTERM and self.drain > 0 and self.started and self._drain_timer is None:
            if self.leaving is not None:
                self.leaving.since = time.monotonic()
            log.info(
                "SIGTERM: /readyz answers 503 for %g s (GATEWAY_DRAIN_SECONDS) while the load balancer takes"
                " this node out, then its websockets close with 1012",
                self.drain,
            )
            self._drain_timer = asyncio.get_running_loop().call_later(self.drain, self.stop, sig)
            return
        self.stop(sig)

    def stop(self, sig: int | None = None) -> None:
        if self.stopped_by is None:
            self.stopped_by = sig
        if self.stop_asked is not None:
            self.stop_asked.set()

    # -- leaving

    async def shutdown(self) -> None:
        served = self.served
        if self.leaving is not None and self.leaving.since is None:
            self.leaving.since = time.monotonic()
        served.stopping = True
        for server in self.servers:
            server.close()  # no new connections while the hints go out
        links = list(served.links)
        window = spread_window(len(links), self.reconnect_rate, self.longest_spread)
        for link, delay in zip(links, spread(len(links), window, random.random)):
            link.close(RESTART_CODE, restart_reason(delay))
        if links:
            log.info("closing %d websockets with %d, retry hints spread over %.1f s", len(links), RESTART_CODE, window)
        await served.wind_down(self.graceful_shutdown)
        for server in self.servers:
            await server.wait_closed()

    def _tick_date(self) -> None:
        """The `date` header every response carries, renewed each second."""
        self.served.default_headers[:] = [(b"date", email.utils.formatdate(usegmt=True).encode())]
        self._date = asyncio.get_running_loop().call_later(1.0, self._tick_date)


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
