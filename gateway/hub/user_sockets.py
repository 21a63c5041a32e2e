"""A node's share of the per-user socket limit: how many websockets each of its users holds here, recorded in
the bus beside every other node's and worker's (gateway.bus.user_sockets), so that GATEWAY_MAX_CONNECTIONS_PER_USER
holds across all the processes that share the bus.

A claim is one round trip before the handshake is accepted, shared by the user's claims made together. Closing
a socket writes the new count at once (in the background); every `RENEW_EVERY` seconds the node writes all its
counts again, which also mends a count that two racing writes left stale. A node that dies stops renewing: its
sockets stop counting within `TTL`.
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


class _Claims:
    """A user's claims sent to the bus together, answered with how many of them fit, the first made first."""

    __slots__ = ("wanted", "granted")

    def __init__(self, granted: asyncio.Future[int]) -> None:
        self.wanted = 0
        self.granted = granted


class SocketsHeld:
    def __init__(self, store: UserSockets, limit: int, process: str | None = None) -> None:
        self.store = store
        self.limit = limit
        self.process = process or uuid.uuid4().hex[:12]
        self.held: Counter[int] = Counter()  # user -> sockets held here, those being claimed included
        self._writes: set[asyncio.Task[None]] = set()
        self.alone = False  # judging by this node's counts alone, the bus out of reach (said once, not per claim)
        self._released: set[int] | None = None  # users whose sockets just ended: their counts are written next
        self._claims: dict[int, _Claims] = {}  # per user, the claims that will go to the bus together next
        self._sending: dict[int, asyncio.Future[int]] = {}  # per user, the answer of the claims sent last

    async def claim(self, user_id: int) -> bool:
        """Whether the user may hold one more socket (counted here from now on: `release` it when it ends).

        The user's claims made in the same turn of the loop, or while an earlier one of theirs is on its way to
        the bus, go there together, as one count: a storm of one user's sockets (a tool's thousand feeds, a
        node's clients coming back) pays a round trip per batch, not per socket. A batch that does not fit
        whole is halved until the most that fit is known; the first claims made are the ones granted."""
        self.held[user_id] += 1
        claims = self._claims.get(user_id)
        if claims is None:
            loop = asyncio.get_running_loop()
            claims = self._claims[user_id] = _Claims(loop.create_future())
            task = loop.create_task(self._send(user_id, claims))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)
        turn = claims.wanted
        claims.wanted += 1
        return turn < await asyncio.shield(claims.granted)  # one claimant gone does not fail the others

    async def _send(self, user_id: int, claims: _Claims) -> None:
        earlier = self._sending.get(user_id)
        self._sending[user_id] = claims.granted
        try:
            if earlier is not None:
                await asyncio.wait([earlier])  # their count is settled first: this batch's counts on from it
            else:
                await asyncio.sleep(0)  # the claims made in this turn of the loop join
            if self._claims.get(user_id) is claims:
                del self._claims[user_id]  # claims made from now on form the next batch
            granted = await self._judge(user_id, self.held[user_id], claims.wanted)
        except BaseException as exc:
            if self._claims.get(user_id) is claims:
                del self._claims[user_id]
            for _ in range(claims.wanted):
                self._drop(user_id)
            if isinstance(exc, asyncio.CancelledError):
                claims.granted.cancel()
            else:
                claims.granted.set_exception(exc)
            raise
        finally:
            if self._sending.get(user_id) is claims.granted:
                del self._sending[user_id]
        for _ in range(claims.wanted - granted):
            self._drop(user_id)  # a refused claim is not counted
        claims.granted.set_result(granted)

    async def _judge(self, user_id: int, count: int, wanted: int) -> int:
        """How many of the last `wanted` of the user's `count` sockets here fit within the limit (the largest
        count that fits is what the bus records)."""
        base = count - wanted
        try:
            async with asyncio.timeout(CLAIM_TIMEOUT):
                fits, refused = 0, wanted + 1
                if await self.store.claim(self.process, user_id, count, self.limit, TTL):
                    fits = wanted
                else:
                    refused = wanted
                while refused - fits > 1:
                    middle = (fits + refused) // 2
                    if await self.store.claim(self.process, user_id, base + middle, self.limit, TTL):
                        fits = middle
                    else:
                        refused = middle
        except (BusError, TimeoutError) as exc:
            if not self.alone:
                log.warning(
                    "per-user socket limit judged by this node's counts alone: the bus did not answer (%s)", exc
                )
                self.alone = True
            return max(0, min(wanted, self.limit - base))
        if self.alone:
            log.info("per-user socket limit counted across the nodes again")
            self.alone = False
        return fits

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
