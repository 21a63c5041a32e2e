"""redis-py's exceptions turned into the bus's own (gateway.bus.errors) where the Redis modules hand back control.

`redis_errors` is a context manager (one shared instance: it keeps no state) for a block that talks to Redis;
`translated` wraps a coroutine function in it. A refusal (`ResponseError`: OOM, a script's error, WRONGTYPE,
CLUSTERDOWN) becomes `BusRefused`; any other redis-py error, a cluster that cannot be reached, and the socket's
own (`OSError`, `TimeoutError`), `BusUnavailable`. Each says what redis-py raised, in one line (`OutOfMemoryError: command not allowed ...`,
`ConnectionError: Error 111 connecting to ...`); the original stays attached as `__cause__`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from redis.exceptions import RedisClusterUnreachableError, RedisError, ResponseError, SlotNotCoveredError

from .clients import unreachable
from .errors import BusError, BusRefused, BusUnavailable

# What redis-py and the socket under it raise when Redis does not do what was asked; the bus's own modules
# catch these inside, where they retry. A Redis Cluster none of whose nodes answers, or whose slot map has a hole,
# raises the last two, which are not RedisErrors.
REDIS_FAILURES = (RedisError, OSError, RedisClusterUnreachableError, SlotNotCoveredError)

P = ParamSpec("P")
T = TypeVar("T")


def bus_error(exc: BaseException) -> BusError | None:
    """The bus's error for a redis-py or socket exception; None for anything else (left as it is)."""
    if isinstance(exc, BusError):
        return None
    if isinstance(exc, ResponseError):
        return BusRefused(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, REDIS_FAILURES):
        return BusUnavailable(unreachable(exc))
    return None


class _RedisErrors:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if exc is not None:
            translated = bus_error(exc)
            if translated is not None:
                raise translated from exc


redis_errors = _RedisErrors()


def translated(call: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """`call`, raising the bus's errors instead of redis-py's."""

    @functools.wraps(call)
    async def translating(*args: P.args, **kwargs: P.kwargs) -> T:
        with redis_errors:
            return await call(*args, **kwargs)

    return translating
