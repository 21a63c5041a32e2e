"""Identical reads in flight at the same time are made once: a reconnect storm of thousands of clients to the
same channel asks Redis and PostgreSQL once per distinct question, not once per client.

A read that depends on *when* it is made (a channel's position) is shared only with callers that were ready
for it before it started: `mark()` orders the node's events, and a caller passes the mark it took once it
began buffering the channel, so a shared answer is never older than what the caller needs. A read takes its
mark as it is sent, at the next turn of the loop: the callers of this turn share it (subscribers resuming one
after another in one turn, each taking its mark after the first asked).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class _Read:
    __slots__ = ("sent", "future")

    def __init__(self) -> None:
        self.sent: int | None = None  # its mark, taken as it is sent (None: not yet, fresh enough for anyone)
        self.future: asyncio.Future[Any]


class SharedReads:
    def __init__(self) -> None:
        self._clock = 0
        self._inflight: dict[Hashable, _Read] = {}

    def mark(self) -> int:
        self._clock += 1
        return self._clock

    async def read(self, key: Hashable, make: Callable[[], Awaitable[T]], since: int = 0) -> T:
        """`make()`'s answer, or the answer of the same read already in flight if it was sent after `since`."""
        found = self._inflight.get(key)
        if found is None or (found.sent is not None and found.sent < since):  # none, or sent before it was ready
            future = self._start(key, make)
        else:
            future = found.future
        return await asyncio.shield(future)  # one caller cancelled does not cancel the others' read

    def _start(self, key: Hashable, make: Callable[[], Awaitable[T]]) -> asyncio.Future[Any]:
        read = _Read()

        async def send() -> Any:
            read.sent = self.mark()  # the callers of this turn of the loop, before it, share it
            return await make()

        read.future = asyncio.ensure_future(send())
        self._inflight[key] = read
        read.future.add_done_callback(functools.partial(self._done, key, read))
        return read.future

    def _done(self, key: Hashable, read: _Read, future: asyncio.Future[Any]) -> None:
        if self._inflight.get(key) is read:
            del self._inflight[key]
        if not future.cancelled():
            future.exception()  # retrieved: every caller may have gone
