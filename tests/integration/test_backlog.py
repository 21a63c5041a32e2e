"""Catching up from history in blocks: each block read once and framed once, however many clients need it.
The history is a real Redis stream, written as the relay's publish script writes it."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator

import msgspec
import pytest

from gateway.bus import history, keys
from gateway.bus.connection import Bus
from gateway.core.protocol import Batch, make_cursor
from gateway.hub.backlog import BLOCK, Backlog


class History:
    """A channel's history on the bus, and a count of the backlog's reads of it."""

    def __init__(self, redis_url: str) -> None:
        self.bus = Bus(redis_url)
        self.tag = keys.Partitions().tag(1)
        self.channel = f"trajectory:{secrets.randbelow(10**9)}"  # a fresh stream for each test
        self.asked = 0
        self.fetched = 0  # messages the reads brought

    async def publish(self, first: int, last: int, keep: int | None = None, batches: bool = False) -> None:
        """Messages first..last, each `{"seq": n}` in MessagePack (or, with `batches`, an empty batch as the relay
        encodes it), the stream trimmed to `keep` as MAXLEN does."""
        name = keys.history(self.tag, self.channel)
        for seq in range(first, last + 1):
            message = b"\x81\xa3seq\xcd" + seq.to_bytes(2, "big")
            if batches:
                message = msgspec.msgpack.encode(
                    Batch(channel=self.channel, seq=seq, cursor=make_cursor(1, seq), jobs=[])
                )
            await self.bus.redis.xadd(name, {"e": 1, "m": message}, id=f"{seq}-0", maxlen=keep, approximate=False)

    async def read(self, channel: str, first: int, last: int) -> list[history.Entry]:
        self.asked += 1
        entries = await history.entries(self.bus, self.tag, channel, first, last)
        self.fetched += len(entries)
        return entries

    def backlog(self, cache_bytes: int | None = None) -> Backlog:
        return Backlog(self.read) if cache_bytes is None else Backlog(self.read, cache_bytes)


@pytest.fixture
async def h(redis_url: str) -> AsyncIterator[History]:
    h = History(redis_url)
    try:
        yield h
    finally:
        await h.bus.redis.aclose()


def seqs(frames: list) -> list[int]:
    return [int.from_bytes(f.data[-2:], "big") for f in frames]


async def test_clients_catching_up_together_share_one_read_and_the_same_frames(h: History) -> None:
    await h.publish(1, 100)
    backlog = h.backlog()
    got = await asyncio.gather(*(backlog.frames(h.channel, "msgpack", 5, 100) for _ in range(50)))
    assert h.asked == 1
    assert all(seqs(frames) == list(range(5, BLOCK + 1)) for frames in got)  # 5 up to the end of the first block
    assert all(a is b for frames in got for a, b in zip(frames, got[0]))  # one frame object per message
    assert await backlog.frames(h.channel, "msgpack", 1, 3) is not None and h.asked == 1  # cached


async def test_the_newest_block_is_read_again_for_messages_newer_than_the_last_read(h: History) -> None:
    await h.publish(1, 40)
    backlog = h.backlog()
    assert seqs(await backlog.frames(h.channel, "msgpack", 33, 40) or []) == list(range(33, 41))
    await h.publish(41, 45)
    assert seqs(await backlog.frames(h.channel, "msgpack", 41, 45) or []) == [41, 42, 43, 44, 45]
    assert h.asked == 2


async def test_the_newest_block_serves_what_it_holds_and_is_read_again_only_past_it(h: History) -> None:
    """At the head of a burst a hundred slow clients ask, one after another, for messages of the newest block, each
    big: those it holds already cost no read, and a read for newer ones brings only those, not the block again."""
    await h.publish(1, 40)
    backlog = h.backlog()
    assert seqs(await backlog.frames(h.channel, "msgpack", 33, 40) or []) == list(range(33, 41))
    for first in range(33, 41):  # clients behind by a little less each: all within what the block holds
        assert seqs(await backlog.frames(h.channel, "msgpack", first, 40) or []) == list(range(first, 41))
    assert (h.asked, h.fetched) == (1, 8)
    await h.publish(41, 45)
    assert seqs(await backlog.frames(h.channel, "msgpack", 38, 45) or []) == list(range(38, 46))
    assert (h.asked, h.fetched) == (2, 13)  # 41..45 read, not 33..45
    await h.publish(46, BLOCK + 33)  # the block fills up, and the next one begins
    assert seqs(await backlog.frames(h.channel, "msgpack", 60, BLOCK + 33) or []) == list(range(60, BLOCK + 33))
    assert (h.asked, h.fetched) == (3, 32) and list(backlog._cache) == [(h.channel, 33)] and not backlog._partial


async def test_messages_the_history_no_longer_holds_are_none(h: History) -> None:
    await h.publish(1, 200, keep=100)
    backlog = h.backlog()
    assert await backlog.frames(h.channel, "msgpack", 50, 60) is None
    assert seqs(await backlog.frames(h.channel, "msgpack", 150, 160) or []) == list(range(150, 161))


async def test_clients_behind_a_blocks_trimmed_head_are_told_so_without_reading_it_again(h: History) -> None:
    """A burst's slow clients fall past the history one after another: the block whose head it trimmed is read once,
    not once more for each of them (each read a block of big batches, to learn what the first read showed)."""
    await h.publish(1, 128, keep=30)  # 99..128 kept: the block 97..128 lost its head
    backlog = h.backlog()
    assert seqs(await backlog.frames(h.channel, "msgpack", 100, 128) or []) == list(range(100, 129))
    asked = h.asked
    for first in (97, 98, 97):
        assert await backlog.frames(h.channel, "msgpack", first, 128) is None
    assert h.asked == asked


async def test_the_cache_stays_within_its_budget_and_forgets_everything_on_a_reset(h: History) -> None:
    await h.publish(1, BLOCK * 20)
    backlog = h.backlog(cache_bytes=BLOCK * 2 * 8 * 10)  # ten blocks of 8-byte messages (and their frames)
    for start in range(1, BLOCK * 20, BLOCK):
        assert seqs(await backlog.frames(h.channel, "msgpack", start, start + BLOCK - 1) or []) == list(
            range(start, start + BLOCK)
        )
    assert backlog._bytes <= backlog.cache_bytes and len(backlog._cache) == 10
    backlog.forget()
    await backlog.frames(h.channel, "msgpack", 1, 1)
    assert h.asked == 21


async def test_the_newest_block_read_again_keeps_the_frames_it_had(h: History) -> None:
    """Clients catching up at the head of a burst read the newest block again and again as it fills: each
    message is framed (for JSON clients, transcoded) once, not once per read."""
    await h.publish(1, 40, batches=True)
    backlog = h.backlog()
    first = await backlog.frames(h.channel, "json", 33, 40) or []
    assert [msgspec.json.decode(f.data)["seq"] for f in first] == list(range(33, 41))
    await h.publish(41, 64, batches=True)  # the block fills up
    again = await backlog.frames(h.channel, "json", 33, 64) or []
    assert h.asked == 2 and [msgspec.json.decode(f.data)["seq"] for f in again] == list(range(33, 65))
    assert all(a is b for a, b in zip(again, first))  # the same frame objects: framed once
    assert backlog._bytes <= backlog.cache_bytes and list(backlog._cache) == [(h.channel, 33)] and not backlog._partial


async def test_a_client_framed_only_what_it_asked_for(h: History) -> None:
    await h.publish(1, BLOCK, batches=True)
    backlog = h.backlog()
    await backlog.frames(h.channel, "json", 30, BLOCK)
    block = backlog._cache[(h.channel, 1)]
    assert sum(f is not None for f in block._frames["json"]) == BLOCK - 29


async def test_a_released_channels_blocks_go_and_the_others_stay(h: History) -> None:
    """The node releases a channel when its last local subscriber leaves: its blocks are given back at once, the
    blocks of channels still followed stay, and a subscriber arriving later reads the history again."""
    first = h.channel
    await h.publish(1, BLOCK * 2)
    second = h.channel = f"{first}0"
    await h.publish(1, BLOCK)
    backlog = h.backlog()
    for channel, start in ((first, 1), (first, BLOCK + 1), (second, 1)):
        assert await backlog.frames(channel, "msgpack", start, start) is not None
    held = backlog._bytes
    assert backlog.channels == 2 and h.asked == 3
    backlog.release(first)
    assert backlog.channels == 1 and [*backlog._cache, *backlog._partial] == [(second, 1)]
    assert 0 < backlog._bytes < held
    assert seqs(await backlog.frames(first, "msgpack", 2, 3) or []) == [2, 3] and h.asked == 4
