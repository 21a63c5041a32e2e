"""Redis may be restarting: the relay waits for it rather than give up its partition's lock."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from redis.exceptions import RedisError

log = logging.getLogger(__name__)

T = TypeVar("T")


async def retry_redis(call: Callable[[], Awaitable[T]]) -> T:
    """`call()` again, backing off up to 2 s, until Redis answers."""
    delay = 0.05
    while True:
        try:
            return await call()
        except (RedisError, OSError) as exc:
            log.warning("redis unavailable (%s); retrying", type(exc).__name__)
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)
