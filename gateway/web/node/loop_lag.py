"""How late the node's event loop runs, measured by a short timer: what the handshake's admission
(gateway.core.admission) follows, and `gateway_event_loop_lag_seconds` on /metrics.

Everything a node does runs on one event loop; when handshakes, resumes or a flood keep it busy, a timer fires
late by as much as anything else waits: a live frame, a ping, the load balancer's `/healthz`. So that lateness,
not CPU, is what says the node is taking more than it can."""

from __future__ import annotations

import asyncio
import time

from ...core.admission import Admission
from ...core.histogram import Histogram

EVERY = 0.05  # seconds between observations
LAG_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class LoopLag:
    """`run()` until cancelled: every EVERY seconds, how late the timer fired, told to `admission`."""

    def __init__(self, admission: Admission | None) -> None:
        self.admission = admission
        self.histogram = Histogram(LAG_BOUNDS)
        self.ticked: float | None = None  # time.monotonic() of the last observation: the loop ran then

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + EVERY
            await asyncio.sleep(EVERY)
            late = max(0.0, loop.time() - due)
            self.ticked = time.monotonic()
            self.histogram.observe(late)
            if self.admission is not None:
                self.admission.observe_lag(late, time.monotonic())
