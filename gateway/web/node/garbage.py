"""A node's use of Python's cyclic garbage collector, and the pauses it costs (`gateway_gc_pause_seconds`).

A node holds thousands of connections, each a few dozen objects that every full (generation 2) pass of the
collector walks while nothing else runs: no frame, no ping, no `/healthz`. At 16,000 connections a pass took
0.1 to 0.6 s. CPython starts one whenever the objects that outlived the younger passes have grown by a quarter
since the last, once 10 passes of generation 1 have run: a reconnect storm, which replaces every connection,
set off 9 in 15 s. So a node, once started:

- freezes what it made before serving (modules, the app, the pools): no pass walks those again;
- lets a full pass wait for 100 passes of generation 1 instead of 10 (2 in the same storm, 250-500 ms each);
- and, once a second, freezes what outlived the younger passes since (`Freezing.settle`): a connection's
  objects are frozen a second or so after it opened, so a full pass walks only what came since, not every
  connection.

Frozen objects still go when their last reference does; what the collector alone could free (a cycle) stays
while frozen. So little cyclic garbage must be made: a connection's objects are freed by reference counting
when it ends (tests/integration/test_direct_protocol.py holds the handshake to that, and `Connection.unlink`
the link's cycle with its connection and session when the socket goes). What is frozen is thawed every
`THAW_EVERY` seconds (in a quiet second where there is one), and the next full pass walks it once, so a cycle
made anyway is freed within about that time (`gateway_gc_frozen_objects` shows what is held frozen).

Freed is not yet given back. C's allocator (glibc's malloc) keeps what was freed for the next allocation:
the sockets' write buffers of clients that fell behind, the parsers' and the compressors' buffers, the chunks
Python's own allocator takes for its objects. Once many connections have left (`RETURN_DROP`, or a quarter
of the most the node held since it last gave memory back, whichever is more), `MemoryReturn` asks it to hand
its free pages back to the operating system (`malloc_trim(0)`, a few milliseconds), so a node whose clients
left for another one returns near its baseline (tests/integration/test_memory_back.py,
`python -m bench.memory_back`) instead of holding its peak until its clients come back.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import time
from collections.abc import Callable, Sized
from typing import Protocol

from ...core.histogram import Histogram

FULL_PASS_AFTER = 100  # passes of generation 1 before a full pass may run (CPython's default: 10)
SETTLE_EVERY = 1.0  # seconds between two freezes of what outlived the younger passes
THAW_EVERY = 600.0  # seconds before what is frozen is walked again by a full pass (cycles among it are freed)
RETURN_DROP = 256  # connections gone since the most the node held before freed memory goes back to the system
RETURN_EVERY = 2.0  # seconds between two looks at the connections' count
PAUSE_BOUNDS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class CollectorPauses:
    """Every pass of the collector, timed, by generation (gc.callbacks): `start()` once, `stop()` to detach; and
    `run()` freezes what outlives the younger passes (see the module's docstring)."""

    def __init__(self) -> None:
        self.histograms = [Histogram(PAUSE_BOUNDS) for _ in range(3)]
        self._began = 0.0
        self.promoted = False  # a pass of generation 1 or 2 ran since the last freeze: it moved survivors on
        self.thawed = time.monotonic()
        self.thawing = False  # thawed, and no full pass since: nothing is frozen until one has walked it all

    def settle(self, now: float) -> None:
        """Freeze what outlived the passes so far: a pass of generation 1 first, so that nothing young (garbage
        not yet looked at among it) is frozen. Every `THAW_EVERY` seconds, thaw instead, in a second without a pass of
        generation 1 where there is one (a quiet node, not a storm)."""
        overdue = now - self.thawed - THAW_EVERY
        if overdue >= 0 and (not self.promoted or overdue >= THAW_EVERY):  # a calm second, or long overdue
            self.thawed = now
            self.thawing = True
            gc.unfreeze()  # the next full pass walks it all, once
            return
        if self.promoted and not self.thawing:
            gc.collect(1)
            gc.freeze()
            self.promoted = False

    async def run(self, every: float = SETTLE_EVERY) -> None:
        while True:
            await asyncio.sleep(every)
            self.settle(time.monotonic())

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
            if info["generation"]:
                self.promoted = True
            if info["generation"] == 2:
                self.thawing = False


def malloc_trim() -> Callable[[], object] | None:
    """glibc's `malloc_trim(0)`: every free page of the C heap back to the system; None where the C library has
    none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class HeldConnections(Protocol):
    """What `MemoryReturn` looks at: the node's open connections and the most it held between two looks (a
    crowd that connects and leaves within one look still counts)."""

    @property
    def connections(self) -> Sized: ...

    def take_most_held(self) -> int: ...


class MemoryReturn:
    """Gives freed memory back to the system once many connections have left (see the module's docstring)."""

    def __init__(self, trim: Callable[[], object] | None = None, drop: int = RETURN_DROP) -> None:
        self.trim = trim if trim is not None else malloc_trim()
        self.drop = drop
        self.most = 0  # the most connections held since memory was last given back
        self.returns = 0  # times it was (gateway_memory_returns)

    def observe(self, connections: int, held: int = 0) -> bool:
        """The connections' count now and the most held at once since the last look; True when that was a
        drop worth giving memory back for, and it was."""
        self.most = max(self.most, held)
        if connections >= self.most:
            self.most = connections
            return False
        if self.most - connections < max(self.drop, self.most // 4):
            return False
        self.most = connections
        if self.trim is None:
            return False
        self.trim()
        self.returns += 1
        return True

    async def run(self, node: HeldConnections, every: float = RETURN_EVERY) -> None:
        """Look at the node's connections every `every` seconds until cancelled."""
        while True:
            await asyncio.sleep(every)
            self.observe(len(node.connections), node.take_most_held())
