"""A node's share of the per-user socket limit: how many websockets each of its users holds here, recorded in
the bus beside every other node's and worker's (gateway.bus.user_sockets), so that GATEWAY_MAX_CONNECTIONS_PER_USER
holds across all the processes that share the bus.

A claim is one round trip before the handshake is accepted. Closing a socket writes the new count at once (in
the background); every `RENEW_EVERY` seconds the node writes all its counts again, which also mends a count
that two racing writes left stale. A node that dies stops renewing: its sockets stop counting within `TTL`.
While the bus cannot be reached the node judges by its own count alone, so nobody is refused for the bus.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter

from ..bus.broker import UserSockets
from ..bus.errors import BusError

log = logging.getLogger(__name__)

TTL = 10.0  # a dead process's sockets stop counting within this
RENEW_EVERY = 3.0
CLAIM_TIMEOUT = 2.0  # seconds a claim may wait on the bus before the node judges alone


class SocketsHeld:
    def __init__(self, store: UserSockets, limit: int, process: str | None = None) -> None:
        self.store = store
        self.limit = limit
        self.process = process or uuid.uuid4().hex[:12]
        self.held: Counter[int] = Counter()  # user -> sockets held here, those being claimed included
        self._writes: set[asyncio.Task[None]] = set()
        self.alone = False  # judging by this node's counts alone, the bus out of reach (said once, not per claim)
        self._released: set[int] | None = None  # users whose sockets just ended: their counts are written next

    async def claim(self, user_id: int) -> bool:
        """Whether the user may hold one more socket (counted here from now on: `release` it when it ends)."""
        self.held[user_id] += 1
        count = self.held[user_id]
        try:
            async with asyncio.timeout(CLAIM_TIMEOUT):
                allowed = await self.store.claim(self.process, user_id, count, self.limit, TTL)
        except (BusError, TimeoutError) as exc:
            if not self.alone:
                log.warning(
                    "per-user socket limit judged by this node's counts alone: the bus did not answer (%s)", exc
                )
                self.alone = True
            allowed = count <= self.limit
        else:
            if self.alone:
                log.info("per-user socket limit counted across the nodes again")
                self.alone = False
        if not allowed:
            self._drop(user_id)
        return allowed

    def release(self, user_id: int) -> None:
        """One of the user's sockets here has ended. The sockets ending together (clients leaving for another
        node) are written in one round trip: a write and a task each would grow the Redis pool to its bound and
        the node's memory with it, for as long as the node runs."""
        self._drop(user_id)
        if self._released is not None:
            self._released.add(user_id)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # the node is gone: its records lapse
        self._released = {user_id}
        task = loop.create_task(self._record_released())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _record_released(self) -> None:
        await asyncio.sleep(0)  # the other sockets ending in this turn of the loop join the write
        released, self._released = self._released or set(), None
        await self._record({user_id: self.held[user_id] for user_id in released})  # their counts now

    async def run(self) -> None:
        """Renew this node's records until cancelled."""
        while True:
            await asyncio.sleep(RENEW_EVERY)
            if self.held:
                await self._record(dict(self.held))

    async def written(self) -> None:
        """Once the records of the sockets released so far are written."""
        await asyncio.gather(*self._writes, return_exceptions=True)

    async def clear(self) -> None:
        """A node shutting down takes its records out at once."""
        await self.written()
        await self._record(dict.fromkeys(self.held, 0))
        self.held.clear()

    def _drop(self, user_id: int) -> None:
        self.held[user_id] -= 1
        if self.held[user_id] <= 0:
            del self.held[user_id]

    async def _record(self, counts: dict[int, int]) -> None:
        try:
            await self.store.record(self.process, counts, TTL)
        except BusError as exc:
            log.warning("per-user socket counts not recorded in the bus: %s", exc)
