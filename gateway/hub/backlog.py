"""What clients that fell behind catch up from: a channel's history, read in aligned blocks of messages.

A burst leaves many slow clients of a channel at about the same place. Each block is read from Redis once
and framed once per wire format (and deflated once, for the clients that negotiated compression: the Frames
are shared), however many clients catch up through it, and a client's backlog is sent a block at a time as
it drains: what catching up costs the node is what live delivery costs, one shared frame
written per client. The newest block, still filling, serves every client it holds enough for; one that needs
more has only the messages past those it holds read. Complete blocks stay cached (least recently used first
out, within a byte budget): the messages at a channel's sequence numbers never change while Redis keeps its
history, and the node forgets them all when Redis may have lost it, and a channel's when its last local
subscriber leaves (nobody here catches up on it any more: a node that 1,000 clients left for another gives that
memory back).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable

from ..bus.history import Entry
from ..core.envelope import message_frame
from ..core.protocol import Format
from ..core.wsframe import Frame
from .shared import SharedReads

BLOCK = 32  # messages per block: a block of big batches stays a few MiB
CACHE_BYTES = 32 << 20  # about 16 MiB of messages


class Block:
    """Up to BLOCK history entries from `first` on, each framed in a format the first time a client needs it."""

    __slots__ = ("first", "entries", "size", "_at", "_frames")

    def __init__(self, first: int, entries: list[Entry], previous: Block | None = None) -> None:
        self.first = first
        self.entries = entries
        self.size = 2 * sum(len(e.msgpack) for e in entries)  # the messages, and their frames in about one format
        self._at = {e.seq: i for i, e in enumerate(entries)}
        self._frames: dict[str, list[Frame | None]] = {}
        if previous is not None:
            # The same block read before it was full: its messages are the same, and so are their frames
            # (a JSON frame is a transcoding, the dearest part of catching up through a burst's big batches).
            for fmt, built in previous._frames.items():
                mine = self._frames[fmt] = [None] * len(entries)
                for i, e in enumerate(entries):
                    j = previous._at.get(e.seq)
                    if j is not None and previous.entries[j].epoch == e.epoch:
                        mine[i] = built[j]

    def complete(self) -> bool:
        return len(self.entries) == BLOCK and self.unbroken()

    def trimmed_past(self, seq: int) -> bool:
        """The history had trimmed message `seq` already when this block was read: no read brings it back (a block
        whose head is gone is otherwise read again for every client that fell that far behind, to learn so)."""
        return bool(self.entries) and seq < self.entries[0].seq

    def unbroken(self) -> bool:
        """Its entries are one run of messages from its first on: what comes next starts past the last."""
        return all(e.seq == self.first + i for i, e in enumerate(self.entries))

    def frames(self, fmt: Format, first: int, last: int) -> list[Frame] | None:
        """Frames of messages first..last (within this block), or None when the block lacks one of them."""
        i, j = self._at.get(first), self._at.get(last)
        if i is None or j is None or j - i != last - first:
            return None
        built = self._frames.get(fmt)
        if built is None:
            built = self._frames[fmt] = [None] * len(self.entries)
        out: list[Frame] = []
        for k in range(i, j + 1):
            frame = built[k]
            if frame is None:
                frame = built[k] = message_frame(self.entries[k].msgpack, fmt)
            out.append(frame)
        return out


class Backlog:
    """`read(channel, first, last)` reads history entries first..last from the bus."""

    def __init__(self, read: Callable[[str, int, int], Awaitable[list[Entry]]], cache_bytes: int = CACHE_BYTES) -> None:
        self._read = read
        self._shared = SharedReads()
        self._cache: OrderedDict[tuple[str, int], Block] = OrderedDict()
        self._partial: OrderedDict[tuple[str, int], Block] = OrderedDict()  # newest blocks, still filling: their
        # frames carry over to the next read of the same block
        self._starts: dict[str, set[int]] = {}  # each channel's blocks held, cached or partial
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
        if frames is None and not block.complete() and not block.trimmed_past(first):
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
        block = self._partial.get(key)
        if block is not None and not fresh:  # what it holds may do: a client that needs more reads it fresh
            return block
        since = self._shared.mark() if fresh else 0
        block = await self._shared.read(key, lambda: self._fetch(channel, start), since)
        kept = self._cache if block.complete() else self._partial
        if kept.get(key) is not block:
            self._drop(self._partial, key)  # a newer read of the newest block, or the block now full
            self._drop(self._cache, key)
            kept[key] = block
            self._bytes += block.size
            self._starts.setdefault(channel, set()).add(start)
        kept.move_to_end(key)
        while self._bytes > self.cache_bytes and (self._cache or len(self._partial) > 1):
            # Within one byte budget, complete blocks first out, least recently used first.
            if self._cache:
                self._drop(self._cache, next(iter(self._cache)))
            else:
                self._drop(self._partial, next(iter(self._partial)))
        return block

    def _drop(self, blocks: OrderedDict[tuple[str, int], Block], key: tuple[str, int]) -> None:
        old = blocks.pop(key, None)
        if old is not None:
            self._bytes -= old.size
            channel, start = key
            if key not in self._cache and key not in self._partial:
                starts = self._starts.get(channel)
                if starts is not None:
                    starts.discard(start)
                    if not starts:
                        del self._starts[channel]

    async def _fetch(self, channel: str, start: int) -> Block:
        """The block from the bus: of the newest block held already, only the messages past those it holds (at
        the head of a burst it is read again for every few messages, each big)."""
        self.reads += 1
        previous = self._partial.get((channel, start))
        held = previous.entries if previous is not None and previous.unbroken() else []
        entries = await self._read(channel, start + len(held), start + BLOCK - 1)
        return Block(start, held + entries, previous)

    def release(self, channel: str) -> None:
        """Nobody on this node follows `channel` now: its blocks go (a read already in flight still completes for
        whoever awaits it; a subscriber arriving later reads the history again)."""
        for start in self._starts.pop(channel, set()):
            self._drop(self._cache, (channel, start))
            self._drop(self._partial, (channel, start))

    @property
    def channels(self) -> int:
        """Channels with blocks held (for tests and /metrics)."""
        return len(self._starts)

    def forget(self) -> None:
        """Redis may have lost its history (it restarted): sequence numbers may mean other messages now."""
        self._cache.clear()
        self._partial.clear()
        self._starts.clear()
        self._bytes = 0
