"""What the Python peers send a new subscriber first: the channel's current state.

The bench's tap keeps it in Redis under the tap channel's own name (``GET bench:trajectory:17``, bench/load.py),
SET before each transaction's changes are published. A peer reads it once for every subscriber who arrives
before the channel's next message, and converts it once (frames it, parses it) for all of them, as the gateway
encodes a snapshot once per position: a read started after the last message the peer saw holds everything the
channel's room did not bring to a subscriber who joined it since. Channels without a kept state read as None.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar, cast

from redis.asyncio import Redis

T = TypeVar("T")
Channel = str | bytes  # the tap channel as the peer names it, `bench:` included


class States(Generic[T]):
    def __init__(self, redis: Redis, convert: Callable[[bytes], T]) -> None:
        self.redis = redis
        self.convert = convert
        self.seen: dict[Channel, int] = {}  # messages seen per channel
        self.reads: dict[Channel, tuple[int, asyncio.Future[T | None]]] = {}  # the latest read, at that count

    def saw(self, channel: Channel) -> None:
        """A message on the channel: a state read before it may lack it."""
        self.seen[channel] = self.seen.get(channel, 0) + 1

    def forget(self, channel: Channel) -> None:
        """The peer stops following the channel: its count no longer tells whether a read is current."""
        self.seen.pop(channel, None)
        self.reads.pop(channel, None)

    def read(self, channel: Channel) -> asyncio.Future[T | None]:
        """The channel's state, for a subscriber already in the channel's room."""
        seen = self.seen.get(channel, 0)
        known = self.reads.get(channel)
        if known is None or known[0] != seen or (known[1].done() and known[1].exception() is not None):
            known = self.reads[channel] = (seen, asyncio.ensure_future(self._read(channel)))
        return known[1]

    async def _read(self, channel: Channel) -> T | None:
        state = await self.redis.get(channel)
        return None if state is None else self.convert(cast(bytes, state))  # the client decodes nothing
