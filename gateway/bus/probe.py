"""What the CLI asks of Redis before anything starts (`gateway check`, and the reachability check before `serve`
and `relay`): does it answer, and how is its memory bounded. Errors are the bus's (gateway.bus.errors); a
`BusUnavailable` says why in one line, in redis-py's words, every sentinel named by its address."""

from __future__ import annotations

import asyncio

from .connection import Bus
from .errors import BusRefused
from .translate import redis_errors


async def ping(url: str, cluster: bool = False, timeout: float = 10.0) -> None:
    """Returns once Redis answers a PING; BusUnavailable when it does not within `timeout`."""
    bus = Bus(url, cluster)
    try:
        with redis_errors:
            async with asyncio.timeout(timeout):
                await bus.redis.ping()
    finally:
        await bus.aclose()


async def memory_settings(url: str, cluster: bool = False, timeout: float = 10.0) -> dict[str, str] | None:
    """Redis's `maxmemory*` settings; None when it refuses CONFIG GET (as managed services often do)."""
    bus = Bus(url, cluster)
    try:
        try:
            with redis_errors:
                async with asyncio.timeout(timeout):
                    found = await bus.redis.config_get("maxmemory*")
        except BusRefused:
            return None
        return {_text(k): _text(v) for k, v in found.items()}
    finally:
        await bus.aclose()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
