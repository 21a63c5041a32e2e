"""Identical reads in flight at the same time are made once: a reconnect storm of thousands of clients to the
same channel asks Redis and PostgreSQL once per distinct question, not once per client.

A read that depends on *when* it is made (a channel's position) is shared only with callers that were ready
for it before it started: `mark()` orders the node's events, and a caller passes the mark it took once it
began buffering the channel, so a shared answer is never older than what the caller needs.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class SharedReads:
    def __init__(self) -> None:
        self._clock = 0
        self._inflight: dict[Hashable, tuple[int, asyncio.Future[Any]]] = {}

    def mark(self) -> int:
        self._clock += 1
        return self._clock

    async def read(self, key: Hashable, make: Callable[[], Awaitable[T]], since: int = 0) -> T:
        """`make()`'s answer, or the answer of the same read already in flight if it started after `since`."""
        entry = self._inflight.get(key)
        if entry is None or entry[0] < since:
            future: asyncio.Future[Any] = asyncio.ensure_future(make())
            entry = self._inflight[key] = (self.mark(), future)
            future.add_done_callback(functools.partial(self._done, key))
        return await asyncio.shield(entry[1])  # one caller cancelled does not cancel the others' read

    def _done(self, key: Hashable, future: asyncio.Future[Any]) -> None:
        entry = self._inflight.get(key)
        if entry is not None and entry[1] is future:
            del self._inflight[key]
        if not future.cancelled():
            future.exception()  # retrieved: every caller may have gone
