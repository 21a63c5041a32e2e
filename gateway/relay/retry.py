"""Redis may be restarting: the relay waits for it, for a while, rather than give up its partition's lock.

Past its patience (`GATEWAY_RELAY_STEP_DOWN_AFTER`) the active relay steps down: a relay whose own link to
Redis stalled or broke would otherwise hold the lock and publish nothing, while a standby that reaches Redis
waits on that lock. Stepping down loses nothing: the successor reads on from the cursor the bus holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..bus.errors import BusRefused, BusUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

STEP_DOWN_AFTER = 10.0  # seconds; the default patience


class BusOutOfReach(Exception):
    """Redis did not answer this relay within its patience: it stands by, so that one that can reach Redis serves."""


class Patience:
    """How long the relay keeps trying one thing on Redis while it does not answer (from the first try, or its
    last answer); None: for ever."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds

    def deadline(self) -> float | None:
        return None if self.seconds is None else asyncio.get_running_loop().time() + self.seconds

    async def attempt(self, call: Callable[[], Awaitable[T]], deadline: float | None) -> T:
        """`call()`, cut off at the deadline (a half-open link answers nothing, and raises nothing either)."""
        if deadline is None:
            return await call()
        cutoff = asyncio.timeout_at(deadline)
        try:
            async with cutoff:
                return await call()
        except TimeoutError as exc:
            if cutoff.expired():
                raise self.exhausted(exc) from exc
            raise

    def check(self, deadline: float | None, exc: BaseException) -> None:
        """After a failed try: raise BusOutOfReach once the deadline has passed."""
        if deadline is not None and asyncio.get_running_loop().time() >= deadline:
            raise self.exhausted(exc) from exc

    def exhausted(self, exc: BaseException) -> BusOutOfReach:
        return BusOutOfReach(f"Redis has not answered for {self.seconds:g} s ({type(exc).__name__}): stepping down")


FOREVER = Patience(None)


async def retry_redis(call: Callable[[], Awaitable[T]], patience: Patience = FOREVER) -> T:
    """`call()` again, backing off up to 2 s, until Redis answers or the relay's patience runs out."""
    delay = 0.05
    deadline = patience.deadline()
    while True:
        try:
            return await patience.attempt(call, deadline)
        except BusRefused as exc:  # Redis answered (refused): its link is not at fault
            deadline = patience.deadline()
            log.warning("redis refused (%s); retrying", exc)
        except BusUnavailable as exc:
            patience.check(deadline, exc)
            log.warning("redis unavailable (%s); retrying", exc)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)
