"""A node's use of Python's cyclic garbage collector, and the pauses it costs (`gateway_gc_pause_seconds`).

A node holds thousands of connections, each a few dozen objects that every full (generation 2) pass of the
collector walks while nothing else runs: no frame, no ping, no `/healthz`. At 16,000 connections a pass took
0.1 to 0.6 s. CPython starts one whenever the objects that outlived the younger passes have grown by a quarter
since the last, once 10 passes of generation 1 have run: a reconnect storm, which replaces every connection,
set off 9 in 15 s. So a node, once started:

- freezes what it made before serving (modules, the app, the pools): no pass walks those again;
- lets a full pass wait for 100 passes of generation 1 instead of 10 (2 in the same storm).

Waiting longer keeps cyclic garbage longer, so little must be made: a connection's objects are freed by
reference counting when it ends (tests/integration/test_direct_protocol.py holds the handshake to that).
"""

from __future__ import annotations

import gc
import time

from ..core.histogram import Histogram

FULL_PASS_AFTER = 100  # passes of generation 1 before a full pass may run (CPython's default: 10)
PAUSE_BOUNDS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class CollectorPauses:
    """Every pass of the collector, timed, by generation (gc.callbacks): `start()` once, `stop()` to detach."""

    def __init__(self) -> None:
        self.histograms = [Histogram(PAUSE_BOUNDS) for _ in range(3)]
        self._began = 0.0

    def start(self) -> None:
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, FULL_PASS_AFTER)
        gc.freeze()  # everything so far lives as long as the process
        gc.callbacks.append(self._observe)

    def stop(self) -> None:
        if self._observe in gc.callbacks:
            gc.callbacks.remove(self._observe)

    def _observe(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.histograms[info["generation"]].observe(time.perf_counter() - self._began)
