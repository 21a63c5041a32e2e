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
The server carries it out (gateway.web.server.serve); this is what the app reads of it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Leaving:
    """Whether the node is on its way out (the app's `state.leaving`; /readyz reads it)."""

    since: float | None = None  # monotonic time of the SIGTERM (or of the shutdown, without a drain)
