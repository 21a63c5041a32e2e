"""Partition ownership: which partitions a relay process serves, and proof that it still holds their locks.

With one partition, a relay either serves it or stands by on its lock. With several, the live relay processes
share them out: each holds about its share and hands extras over when more relays join; the partitions of a
relay that dies are taken by the others. A lock lives in the session of its own connection
(gateway.store.partitions), and is proven alive before a publish.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from ..bus.errors import Fenced
from ..store import partitions
from ..store.errors import STORE_UNAVAILABLE
from ..store.types import Connection
from .retry import BusOutOfReach

log = logging.getLogger(__name__)
RECANCEL_AFTER = 0.5  # seconds a cancelled session's work may take to end before it is cancelled again

SHARE_EVERY = 0.5  # how often a relay looks at its share of the partitions
LOCK_CHECK_TIMEOUT = 2.0
# The lock's session is proven alive before a publish unless it was this recently: a round trip saved per cycle
# when changes come one by one. A relay that lost its lock meanwhile is still stopped by the Redis fence.
LOCK_PROOF_AGE = 0.5
# The lock's session must show activity to live (gateway.store.partitions.LOCK_IDLE_LIMIT): the serving relay
# proves it this often whatever its cycle is doing, so that only a relay cut off from PostgreSQL (or frozen)
# loses it.
LOCK_TOUCH = 2.0


class LostLock(Exception):
    pass


# What ends a partition's service without ending the relay: it stands by (or hands the partition back).
SERVICE_ERRORS: tuple[type[Exception], ...] = (LostLock, Fenced, BusOutOfReach, *STORE_UNAVAILABLE)


class HeldLock:
    """A partition's advisory lock, held as long as the session of its dedicated connection lives."""

    def __init__(self, db: Connection, partition: int) -> None:
        self.db = db
        self.partition = partition
        self._proven = 0.0  # when the session last answered
        self._pinging = asyncio.Lock()  # the cycle and the keeper share the connection: one query at a time

    async def prove(self) -> None:
        """Our session holds the lock as long as it is alive: prove it is (at most LOCK_PROOF_AGE ago)."""
        if time.monotonic() - self._proven < LOCK_PROOF_AGE:
            return
        async with self._pinging:
            if time.monotonic() - self._proven < LOCK_PROOF_AGE:
                return  # proven while we waited
            try:
                await partitions.ping(self.db, LOCK_CHECK_TIMEOUT)
            except STORE_UNAVAILABLE as exc:
                raise LostLock(f"lock connection failed: {type(exc).__name__}") from exc
            self._proven = time.monotonic()

    async def hold_while(self, work: Awaitable[None]) -> None:
        """Run `work`, proving the session alive every LOCK_TOUCH meanwhile; a lost lock ends it with LostLock."""
        task = asyncio.ensure_future(work)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=LOCK_TOUCH)
                if not task.done():
                    await self.prove()
            task.result()
        finally:
            # Cancel until it is done: on Python 3.11 a cancellation that meets an inner timeout or a call ending
            # at the same moment can be lost inside the work, which then ran on, holding the lock (a stopped relay
            # kept it until it was killed, 10 s later).
            while not task.done():
                task.cancel()
                await asyncio.wait({task}, timeout=RECANCEL_AFTER)
            if not task.cancelled():
                task.exception()  # retrieved: the work's own error is not what ends this session

    def release(self) -> None:
        """End the session, and with it the lock (at once, whatever state the connection is in)."""
        self.db.terminate()


async def take_or_wait(database_url: str, partition: int) -> HeldLock:
    """The partition's lock: at once if it is free, else once its holder is gone (standing by till then)."""
    db = await partitions.lock_connection(database_url)
    if not await partitions.try_lock(db, partition):
        log.info("another relay is active; standing by")
        await partitions.wait_for_lock(db, partition)
    return HeldLock(db, partition)


async def try_take(database_url: str, partition: int) -> HeldLock | None:
    """The partition's lock if it is free now."""
    db = await partitions.lock_connection(database_url)
    if not await partitions.try_lock(db, partition):
        db.terminate()
        return None
    return HeldLock(db, partition)


class PartitionServer(Protocol):
    async def serve_once(self, lock: HeldLock) -> None:
        """Serve the lock's partition until the lock or the bus is lost; release the lock."""


class Sharing:
    """Hold about 1/N of the partitions (N live relays, as PostgreSQL counts their member connections): take
    free ones while below the share, hand extras over (stop serving, unlock) while above it."""

    def __init__(
        self,
        database_url: str,
        count: int,
        server: Callable[[int], PartitionServer],
        serving: dict[int, PartitionServer],
    ) -> None:
        self.database_url = database_url
        self.count = count
        self.server = server  # makes what serves a partition
        self.serving = serving  # what the process serves, by partition (kept up to date here)
        self.tasks: dict[int, asyncio.Task[None]] = {}

    async def run(self) -> None:
        member: Connection | None = None
        delay = 0.2
        try:
            while True:
                for p in [p for p, t in self.tasks.items() if t.done()]:
                    del self.tasks[p]
                    self.serving.pop(p, None)
                try:
                    if member is None or member.is_closed():
                        member = await partitions.member_connection(self.database_url)
                    relays = await partitions.count_relays(member)
                    share = -(-self.count // max(1, relays))
                    for p in sorted(self.tasks)[share:]:
                        log.info("handing partition %d over (%d relays share %d partitions)", p, relays, self.count)
                        self.tasks.pop(p).cancel()
                        self.serving.pop(p, None)
                    if len(self.tasks) < share:
                        await self._take(member, share)
                    delay = 0.2
                    await asyncio.sleep(SHARE_EVERY)
                except STORE_UNAVAILABLE as exc:
                    log.warning("relay cannot reach PostgreSQL (%s); retrying", type(exc).__name__)
                    member = None
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
        finally:
            for task in self.tasks.values():
                task.cancel()
            await asyncio.gather(*self.tasks.values(), return_exceptions=True)
            if member is not None:
                member.terminate()

    async def _take(self, member: Connection, share: int) -> None:
        held = await partitions.held_partitions(member)
        free = [p for p in range(self.count) if p not in held and p not in self.tasks]
        random.shuffle(free)  # relays starting together do not all reach for the same one
        for p in free[: share - len(self.tasks)]:
            lock = await try_take(self.database_url, p)
            if lock is None:
                continue
            server = self.serving[p] = self.server(p)
            self.tasks[p] = asyncio.create_task(server.serve_once(lock), name=f"relay-partition-{p}")
