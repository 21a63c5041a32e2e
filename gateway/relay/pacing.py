"""When the relay reads again: every few milliseconds while changes come fast, on a writer's NOTIFY when idle.

NOTIFY takes a global lock at commit, so writers notify only while the relay says it sleeps
(`relay_wakeup.sleeping`). A busy relay polls; it marks itself asleep only when changes stop or come slowly,
and stays so while they keep coming slowly (docs/operations.md, "Waking the relay: NOTIFY only while it sleeps").

Asleep, a cycle that wakes for what is due (a channel's window, a team's summary, a wave's finish) publishes it
without reading the outbox: with the flag set, every commit since the last read has sent a NOTIFY, and none came.
It reads anyway if the last read is IDLE_POLL old, the fallback for a wake-up missed.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

from ..store import outbox
from ..store.outbox import OutboxReader, ReadResult
from ..store.types import Connection

IDLE_POLL = 0.5  # asleep, a due cycle reads too once the last read is this old: the fallback for a missed wake-up
SECOND_LOOK = 0.05  # just fallen asleep: when to look again for a commit that raced the flag
# Awake, from the start of one read to the next. Each read costs the relay a cycle, most of it fixed (two round
# trips): at 20 ms a busy relay spends about a quarter less than at 10 ms (docs/performance.md, steady), and a
# job channel's window is 20 ms at least, so a busy channel still goes out with every read.
BUSY_POLL = 0.020
LINGER = 0.2  # stay awake this long after the last change before sleeping...
# ...but only while transactions commit this close together: slower, a read on each writer's NOTIFY costs the
# relay no more reads than polling would, NOTIFY costs the writers little at that rate, and a change goes out as
# soon as it commits rather than at the next poll (up to BUSY_POLL later). The pace counts transactions, not the
# reads that found some, so a polling relay sees the writers' pace, not its own.
STEADY_GAP = BUSY_POLL
# uvloop's timers count whole milliseconds from a clock read at the start of the loop's turn, so a wait for a due
# time can end up to about a millisecond before it by time.monotonic(), the batcher's clock: the cycle then finds
# nothing due and waits again, up to four cycles for one due time (about a third of such waits ended early, measured).
# Waking this much later finds it due.
TIMER_SLACK = 0.002


class Pace:
    """How far apart transactions have committed lately: a moving average of the time between reads that found
    changes, divided by the transactions each found."""

    def __init__(self) -> None:
        self.gap = 1.0  # seconds
        self.last_change = time.monotonic()

    def observe(self, now: float, commits: int = 1) -> None:
        self.gap = 0.8 * self.gap + 0.2 * min((now - self.last_change) / max(commits, 1), 1.0)
        self.last_change = now


class Pacer:
    """One partition's pace: polling while changes come fast, sleeping on NOTIFY while they come slowly."""

    def __init__(self, db: Connection, reader: OutboxReader, partition: int, process: Pace | None = None) -> None:
        self.db = db  # the outbox connection, which listens for the writers' NOTIFY
        self.reader = reader
        self.partition = partition
        self.pace = Pace()  # this partition's changes
        # One of several partitions of a process, the pace of all of them together. Spread over P partitions,
        # the same commits come P times further apart in each: alone, each would sleep and read once per NOTIFY,
        # and the reads (each with its fixed cost in PostgreSQL) would grow with P. So while the process is
        # busy, a partition that had a change lately polls too, on the process's grid (multiples of BUSY_POLL,
        # not BUSY_POLL after its own last read), and the partitions read in one statement, as one partition
        # would (gateway.store.joint_reads).
        self.process = process
        self.wake = asyncio.Event()
        self.asleep = False  # what relay_wakeup says of this partition: writers NOTIFY while it is set
        self.read_at = 0.0  # monotonic: when the last cycle read the outbox

    async def start(self) -> None:
        """Before the first cycle: awake (a relay that stood by may find a backlog)."""
        self.pace.last_change = time.monotonic()
        await self.set_sleeping(False)

    async def set_sleeping(self, sleeping: bool) -> None:
        await outbox.set_sleeping(self.db, self.partition, sleeping)
        self.asleep = sleeping

    def before_read(self) -> None:
        self.read_at = time.monotonic()
        if self.asleep:
            self.wake.clear()  # writers still NOTIFY: a commit from now on wakes the next wait

    async def wait(
        self,
        result: ReadResult,
        started: float,
        now: float,
        held_since: float | None,
        next_due: Callable[[], float | None],
    ) -> bool:
        """Wait until the next cycle after one that began at `started` and read `result` (not called after a full
        read: read at once); whether that cycle reads the outbox. Each job channel keeps its own pace in the
        batcher (a held channel's window is one of the due times), so the relay itself gathers nothing: awake,
        it reads again BUSY_POLL after the last cycle began (its own cost not added to the wait); asleep, on a
        NOTIFY, or it wakes at the next due time to publish, reading only if the last read is IDLE_POLL old."""
        if result.changes or result.held_back:
            self.pace.observe(now, result.commits)
            if self.process is not None:
                self.process.observe(now, result.commits)
            if self.asleep and self._busy(now):
                await self.set_sleeping(False)  # busy: poll, and spare the writers their NOTIFY
        if result.held_back and held_since is not None:
            # Back off while an open transaction holds the horizon: it may stay open for long.
            await asyncio.sleep(min(0.1, BUSY_POLL + (now - held_since) / 10))
            return True
        if self._busy(now) or (result.changes and not self.asleep):
            # Awake: poll again soon. Writers are not asked to NOTIFY meanwhile (it serialises commits). A held
            # channel whose window ends before the next poll goes out with it: at most one cycle per BUSY_POLL,
            # however many channels' windows end in between.
            if self.process is not None:  # on the loop's clock: partitions due at one point wake in one tick
                now_on_loop = asyncio.get_running_loop().time()
                await asyncio.sleep(next_grid_point(now_on_loop) - now_on_loop)
            else:
                await asyncio.sleep(max(0.0, started + BUSY_POLL - time.monotonic()))
            return True
        return await self._sleep(next_due())

    def _busy(self, now: float) -> bool:
        """Changes come fast: in this partition, or (it had one lately) in its process's partitions together."""
        if now - self.pace.last_change >= LINGER:
            return False
        return self.pace.gap < STEADY_GAP or (self.process is not None and self.process.gap < STEADY_GAP)

    async def _sleep(self, due: float | None) -> bool:
        """Wait for a writer's NOTIFY (or what is due); whether the next cycle reads. The relay stays marked
        asleep after it wakes, as long as changes come slowly: two UPDATEs a cycle saved, and the next wait needs
        no second look."""
        timeout = IDLE_POLL if due is None else max(0.0, due - time.monotonic()) + TIMER_SLACK
        look = due is None  # nothing due: this wake-up is only a look
        if not self.asleep:
            # Ask writers to wake us, then look once more: a commit may have slipped in before the flag.
            self.wake.clear()
            await self.set_sleeping(True)
            if await self.reader.peek():
                return True
            # A writer whose statement still saw the flag unset sends no NOTIFY, and may commit just after
            # that look: look again shortly, once (even if something is due sooner, that cycle reads).
            timeout, look = min(timeout, SECOND_LOOK), True
        try:
            async with asyncio.timeout(timeout):
                await self.wake.wait()
            return True
        except TimeoutError:
            return look or time.monotonic() - self.read_at >= IDLE_POLL


def next_grid_point(now: float) -> float:
    """The first multiple of BUSY_POLL after `now`: the busy partitions of a process read at these together."""
    return (math.floor(now / BUSY_POLL) + 1) * BUSY_POLL
