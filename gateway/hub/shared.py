"""Identical reads in flight at the same time are made once: a reconnect storm of thousands of clients to the
same channel asks Redis and PostgreSQL once per distinct question, not once per client.

A read that depends on *when* it is made (a channel's position) is shared only with callers that were ready
for it before it started: `mark()` orders the node's events, and a caller passes the mark it took once it
began buffering the channel, so a shared answer is never older than what the caller needs. A read takes its
mark as it is sent, at the next turn of the loop: the callers of this turn share it (subscribers resuming one
after another in one turn, each taking its mark after the first asked).

A read asked to be kept (`keep=True`: a snapshot's pages) serves callers on the same terms for `KEEP` seconds
after it is done: subscribers that arrived together but walk a big snapshot's pages a little apart, each as
fast as it reads, then read each page once between them, not once each.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

KEEP = 1.0  # seconds a finished read asked to be kept serves later callers
KEPT = 256  # finished reads kept at most, the oldest out first (what is kept is what a second's reads brought)


class _Read:
    __slots__ = ("sent", "future", "done_at")

    def __init__(self) -> None:
        self.sent: int | None = None  # its mark, taken as it is sent (None: not yet, fresh enough for anyone)
        self.future: asyncio.Future[Any]
        self.done_at = 0.0  # time.monotonic() when it was done (a kept read)

    def serves(self, since: int) -> bool:
        """Fresh enough for a caller that began buffering at mark `since`: sent after it."""
        return self.sent is None or self.sent >= since


class SharedReads:
    def __init__(self) -> None:
        self._clock = 0
        self._inflight: dict[Hashable, _Read] = {}
        self._kept: OrderedDict[Hashable, _Read] = OrderedDict()  # done, asked to be kept: oldest first
        self._expiry: asyncio.TimerHandle | None = None

    def mark(self) -> int:
        self._clock += 1
        return self._clock

    async def read(self, key: Hashable, make: Callable[[], Awaitable[T]], since: int = 0, keep: bool = False) -> T:
        """`make()`'s answer, or the answer of the same read already in flight (or done within `KEEP` seconds, if
        it was asked to be kept) if it was sent after `since`."""
        found = self._inflight.get(key)
        if found is None or not found.serves(since):  # none, or sent before it was ready
            kept = self._kept.get(key) if keep else None
            if kept is not None and kept.serves(since) and time.monotonic() - kept.done_at <= KEEP:
                return kept.future.result()
            future = self._start(key, make, keep)
        else:
            future = found.future
        return await asyncio.shield(future)  # one caller cancelled does not cancel the others' read

    def _start(self, key: Hashable, make: Callable[[], Awaitable[T]], keep: bool) -> asyncio.Future[Any]:
        read = _Read()

        async def send() -> Any:
            read.sent = self.mark()  # the callers of this turn of the loop, before it, share it
            return await make()

        read.future = asyncio.ensure_future(send())
        self._inflight[key] = read
        read.future.add_done_callback(functools.partial(self._done, key, read, keep))
        return read.future

    def _done(self, key: Hashable, read: _Read, keep: bool, future: asyncio.Future[Any]) -> None:
        if self._inflight.get(key) is read:
            del self._inflight[key]
        if future.cancelled():
            return
        if future.exception() is None and keep:  # retrieved either way: every caller may have gone
            read.done_at = time.monotonic()
            self._kept.pop(key, None)
            self._kept[key] = read
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
            if self._expiry is None:
                self._expiry = asyncio.get_running_loop().call_later(KEEP, self._expire)

    def _expire(self) -> None:
        """Drop what is older than `KEEP`; look again while anything is kept (an idle node holds none of it)."""
        self._expiry = None
        now = time.monotonic()
        while self._kept and now - next(iter(self._kept.values())).done_at > KEEP:
            self._kept.popitem(last=False)
        if self._kept:
            oldest = next(iter(self._kept.values())).done_at
            self._expiry = asyncio.get_running_loop().call_later(max(0.0, oldest + KEEP - now) + 0.01, self._expire)

    @property
    def kept(self) -> int:
        """Finished reads held for later callers (for tests)."""
        return len(self._kept)
