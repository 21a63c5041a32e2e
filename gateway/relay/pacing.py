"""When the relay reads again: at once under load, a tick later after changes, on a writer's NOTIFY when idle.

NOTIFY takes a global lock at commit, so writers notify only while the relay says it sleeps
(`relay_wakeup.sleeping`). A busy relay polls; it marks itself asleep only when changes stop or come slowly,
and stays so while they keep coming slowly (docs/operations.md, "Waking the relay: NOTIFY only while it sleeps").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import asyncpg

from ..core.batching import batch_delay
from ..store import outbox
from ..store.outbox import OutboxReader, ReadResult

IDLE_POLL = 0.5  # asleep, the fallback when a wake-up is missed
SECOND_LOOK = 0.05  # just fallen asleep: when to look again for a commit that raced the flag
BUSY_POLL = 0.005  # awake, between polls that found nothing
LINGER = 0.2  # stay awake this long after the last change before sleeping...
STEADY_GAP = 0.02  # ...but only while changes come this close together: slower, NOTIFY costs writers little


class Pacer:
    """One partition's pace: polling while changes come fast, sleeping on NOTIFY while they come slowly."""

    def __init__(self, db: asyncpg.Connection, reader: OutboxReader, partition: int) -> None:
        self.db = db  # the outbox connection, which listens for the writers' NOTIFY
        self.reader = reader
        self.partition = partition
        self.wake = asyncio.Event()
        self.asleep = False  # what relay_wakeup says of this partition: writers NOTIFY while it is set
        self.gap = 1.0  # how far apart changes have come lately (a moving average), in seconds
        self.last_change = time.monotonic()

    async def start(self) -> None:
        """Before the first cycle: awake (a relay that stood by may find a backlog)."""
        self.last_change = time.monotonic()
        await self.set_sleeping(False)

    async def set_sleeping(self, sleeping: bool) -> None:
        await outbox.set_sleeping(self.db, self.partition, sleeping)
        self.asleep = sleeping

    def before_read(self) -> None:
        if self.asleep:
            self.wake.clear()  # writers still NOTIFY: a commit from now on wakes the next wait

    async def wait(
        self, result: ReadResult, now: float, held_since: float | None, next_due: Callable[[], float | None]
    ) -> None:
        """Wait until the next cycle after one that read `result` (not called after a full read: read at once)."""
        if result.changes or result.held_back:
            self.gap = 0.8 * self.gap + 0.2 * min(now - self.last_change, 1.0)
            self.last_change = now
            if self.asleep and self.gap < STEADY_GAP:
                await self.set_sleeping(False)  # busy: poll, and spare the writers their NOTIFY
        delay = batch_delay(len(result.changes))
        if result.held_back and held_since is not None:
            # Back off while an open transaction holds the horizon: it may stay open for long.
            delay = max(delay, min(0.1, BUSY_POLL + (now - held_since) / 10))
        if self.asleep and not result.held_back:
            # Changes come slowly: the tick's gathering is folded into the wait for the next NOTIFY (one
            # wake-up a cycle instead of two; most commits come after the tick anyway).
            not_before = now + delay
        else:
            not_before = 0.0
            if delay:
                await asyncio.sleep(delay)
        if result.held_back or (result.changes and not self.asleep):
            return  # busy: read again at once (asleep, a commit since the read has set the wake-up)
        due = next_due()
        if now - self.last_change < LINGER and self.gap < STEADY_GAP:
            # Awake: poll again soon. Writers are not asked to NOTIFY meanwhile (it serialises commits).
            wait = BUSY_POLL if due is None else min(BUSY_POLL, max(0.0, due - time.monotonic()))
            await asyncio.sleep(wait)
            return
        await self._sleep(due)
        if not_before > time.monotonic():
            await asyncio.sleep(not_before - time.monotonic())

    async def _sleep(self, due: float | None) -> None:
        """Wait for a writer's NOTIFY (or what is due). The relay stays marked asleep after it wakes, as long as
        changes come slowly: two UPDATEs a cycle saved, and the next wait needs no second look."""
        timeout = IDLE_POLL if due is None else max(0.0, due - time.monotonic())
        if not self.asleep:
            # Ask writers to wake us, then look once more: a commit may have slipped in before the flag.
            self.wake.clear()
            await self.set_sleeping(True)
            if await self.reader.peek():
                return
            # A writer whose statement still saw the flag unset sends no NOTIFY, and may commit just after
            # that look: look again shortly, once, instead of at the next due time.
            timeout = min(timeout, SECOND_LOOK)
        try:
            async with asyncio.timeout(timeout):
                await self.wake.wait()
        except TimeoutError:
            pass
