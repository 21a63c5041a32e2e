"""How a node leaves when it is stopped (`gateway serve` and each of its `--workers`), so that nobody notices.

SIGTERM, the signal a deploy sends:

1. `/readyz` answers 503 ("shutting down") at once, and the node serves on as before for `GATEWAY_DRAIN_SECONDS`
   (6 by default): the load balancer's health check takes it out of rotation meanwhile, so new connections go
   to the other nodes. A connection that still arrives is served, and closed with the rest.
2. Then it stops accepting and closes every websocket with 1012 and a retry hint of its own in the close reason
   (gateway.core.restart): the hints spread the reconnects over a window, at a quarter of
   `GATEWAY_ADMISSION_RATE` a second but over at most `GATEWAY_RESTART_SPREAD_SECONDS`, so the remaining nodes
   take them in at a pace they manage rather than all in the same instant, and the later ones find the node
   back. Each client resumes from its cursors on another node.
3. Once the clients have answered the close frames (a client that does not is cut off after 2 s), the app shuts
   down and the process exits 0.

A second SIGTERM during the drain, SIGINT (Ctrl-C), or `GATEWAY_DRAIN_SECONDS=0` skip the drain: the node
closes its websockets (with their hints) at once. docs/operations.md, "Rolling deploys", has the procedure.
"""

from __future__ import annotations

import logging
import random
import signal
import socket
import time
from dataclasses import dataclass
from types import FrameType

import uvicorn

from ..config import Settings
from ..core.restart import RESTART_CODE, restart_reason, spread, spread_window
from .direct import DirectLink

log = logging.getLogger("gateway")


@dataclass
class Leaving:
    """Whether the node is on its way out (the app's `state.leaving`; /readyz reads it)."""

    since: float | None = None  # monotonic time of the SIGTERM (or of the shutdown, without a drain)


class NodeServer(uvicorn.Server):
    """uvicorn's server with the node's way of leaving: a drain on SIGTERM, then spread retry hints."""

    def __init__(self, config: uvicorn.Config, settings: Settings, leaving: Leaving) -> None:
        super().__init__(config)
        self.leaving = leaving
        self.drain = settings.drain_seconds
        # A quarter of what a node admits: what one here resumes while it carries the load, with the drained
        # node back (in about 5 s) for the later part of the window (docs/reliability.md, "Rolling deploys").
        self.reconnect_rate = settings.admission_rate / 4
        self.longest_spread = settings.restart_spread
        self._drain_until: float | None = None
        self._drain_told = False

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """A signal (uvicorn's handler): SIGTERM on a started node starts the drain; anything else stops now."""
        if sig == signal.SIGTERM and self.drain > 0 and self.started and self._drain_until is None:
            now = time.monotonic()
            self.leaving.since = now
            self._drain_until = now + self.drain
            return  # on_tick ends the drain; no logging in a signal handler
        super().handle_exit(sig, frame)

    async def on_tick(self, counter: int) -> bool:
        if self._drain_until is not None and not self.should_exit:
            if not self._drain_told:
                self._drain_told = True
                log.info(
                    "SIGTERM: /readyz answers 503 for %g s (GATEWAY_DRAIN_SECONDS) while the load balancer takes"
                    " this node out, then its websockets close with 1012",
                    self.drain,
                )
            if time.monotonic() >= self._drain_until:
                super().handle_exit(signal.SIGTERM, None)  # recorded as uvicorn records it: exit 0 after
        return await super().on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.leaving.since is None:
            self.leaving.since = time.monotonic()
        for server in self.servers:
            server.close()  # no new connections while the hints go out (uvicorn closes them again: harmless)
        links = [c for c in self.server_state.connections if isinstance(c, DirectLink)]
        window = spread_window(len(links), self.reconnect_rate, self.longest_spread)
        for link, delay in zip(links, spread(len(links), window, random.random)):
            link.close(RESTART_CODE, restart_reason(delay))
        if links:
            log.info("closing %d websockets with %d, retry hints spread over %.1f s", len(links), RESTART_CODE, window)
        await super().shutdown(sockets)
