"""What clients that fell behind catch up from: a channel's history, read in aligned blocks of messages.

A burst leaves many slow clients of a channel at about the same place. Each block is read from Redis once
and framed once per wire format, however many clients catch up through it, and a client's backlog is sent a
block at a time as it drains: what catching up costs the node is what live delivery costs, one shared frame
written per client. Complete blocks stay cached (least recently used first out, within a byte budget): the
messages at a channel's sequence numbers never change while Redis keeps its history, and the node forgets
them all when Redis may have lost it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable

from ..bus.history import Entry
from ..core.protocol import Format, msgpack_to_json
from ..core.wsframe import Frame
from .shared import SharedReads

BLOCK = 32  # messages per block: a block of big batches stays a few MiB
CACHE_BYTES = 32 << 20  # about 16 MiB of messages


class Block:
    __slots__ = ("first", "entries", "size", "_frames")

    def __init__(self, first: int, entries: list[Entry]) -> None:
        self.first = first
        self.entries = entries
        self.size = 2 * sum(len(e.msgpack) for e in entries)  # the messages, and their frames in about one format
        self._frames: dict[str, list[Frame]] = {}

    def complete(self) -> bool:
        return len(self.entries) == BLOCK and all(e.seq == self.first + i for i, e in enumerate(self.entries))

    def frames(self, fmt: Format, first: int, last: int) -> list[Frame] | None:
        """Frames of messages first..last (within this block), or None when the block lacks one of them."""
        built = self._frames.get(fmt)
        if built is None:
            if fmt == "json":
                built = [Frame(msgpack_to_json(e.msgpack), text=True) for e in self.entries]
            else:
                built = [Frame(e.msgpack, text=False) for e in self.entries]
            self._frames[fmt] = built
        at = {e.seq: i for i, e in enumerate(self.entries)}
        if first not in at or last not in at or at[last] - at[first] != last - first:
            return None
        return built[at[first] : at[last] + 1]


class Backlog:
    """`read(channel, first, last)` reads history entries first..last from the bus."""

    def __init__(self, read: Callable[[str, int, int], Awaitable[list[Entry]]], cache_bytes: int = CACHE_BYTES) -> None:
        self._read = read
        self._shared = SharedReads()
        self._cache: OrderedDict[tuple[str, int], Block] = OrderedDict()
        self._bytes = 0
        self.cache_bytes = cache_bytes
        self.reads = 0  # blocks read from the bus (for tests and /metrics)

    async def frames(self, channel: str, fmt: Format, first: int, last: int) -> list[Frame] | None:
        """Frames of messages `first` up to `last` or the end of `first`'s block, whichever comes first; None
        when the history no longer holds them all."""
        start = (first - 1) // BLOCK * BLOCK + 1
        last = min(last, start + BLOCK - 1)
        block = await self._block(channel, start, fresh=False)
        frames = block.frames(fmt, first, last)
        if frames is None and not block.complete():
            # A read of the newest block already in flight may predate the messages this client needs.
            block = await self._block(channel, start, fresh=True)
            frames = block.frames(fmt, first, last)
        return frames

    async def _block(self, channel: str, start: int, fresh: bool) -> Block:
        key = (channel, start)
        block = self._cache.get(key)
        if block is not None:
            self._cache.move_to_end(key)
            return block
        since = self._shared.mark() if fresh else 0
        block = await self._shared.read(key, lambda: self._fetch(channel, start), since)
        if block.complete() and key not in self._cache:
            self._cache[key] = block
            self._bytes += block.size
            while self._bytes > self.cache_bytes and self._cache:
                _, old = self._cache.popitem(last=False)
                self._bytes -= old.size
        return block

    async def _fetch(self, channel: str, start: int) -> Block:
        self.reads += 1
        return Block(start, await self._read(channel, start, start + BLOCK - 1))

    def forget(self) -> None:
        """Redis may have lost its history (it restarted): sequence numbers may mean other messages now."""
        self._cache.clear()
        self._bytes = 0
