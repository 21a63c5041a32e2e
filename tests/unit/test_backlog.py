"""Catching up from history in blocks: each block read once and framed once, however many clients need it."""

from __future__ import annotations

import asyncio

from gateway.bus.history import Entry
from gateway.hub.backlog import BLOCK, Backlog


class History:
    """A channel's history as Redis keeps it: the newest `keep` messages up to `newest`."""

    def __init__(self, newest: int, keep: int = 10_000) -> None:
        self.newest, self.keep, self.asked = newest, keep, 0

    async def read(self, channel: str, first: int, last: int) -> list[Entry]:
        self.asked += 1
        await asyncio.sleep(0)  # a round trip: callers meanwhile share it
        oldest = max(1, self.newest - self.keep + 1)
        return [Entry(1, s, b"\x81\xa3seq\xcd" + s.to_bytes(2, "big")) for s in range(max(first, oldest), min(last, self.newest) + 1)]


async def test_clients_catching_up_together_share_one_read_and_the_same_frames() -> None:
    history = History(newest=100)
    backlog = Backlog(history.read)
    got = await asyncio.gather(*(backlog.frames("trajectory:1", "msgpack", 5, 100) for _ in range(50)))
    assert history.asked == 1
    assert all(len(frames) == BLOCK - 4 for frames in got)  # 5 up to the end of the first block
    assert all(a is b for frames in got for a, b in zip(frames, got[0]))  # one frame object per message
    assert await backlog.frames("trajectory:1", "msgpack", 1, 3) is not None and history.asked == 1  # cached


async def test_the_newest_block_is_read_again_for_messages_newer_than_the_last_read() -> None:
    history = History(newest=40)
    backlog = Backlog(history.read)
    assert len(await backlog.frames("trajectory:1", "msgpack", 33, 40) or []) == 8
    history.newest = 45
    frames = await backlog.frames("trajectory:1", "msgpack", 41, 45)
    assert frames is not None and [int.from_bytes(f.data[-2:], "big") for f in frames] == [41, 42, 43, 44, 45]
    assert history.asked == 2


async def test_messages_the_history_no_longer_holds_are_none() -> None:
    history = History(newest=200, keep=100)
    backlog = Backlog(history.read)
    assert await backlog.frames("trajectory:1", "msgpack", 50, 60) is None
    assert await backlog.frames("trajectory:1", "msgpack", 150, 160) is not None


async def test_the_cache_stays_within_its_budget_and_forgets_everything_on_a_reset() -> None:
    history = History(newest=BLOCK * 100)
    backlog = Backlog(history.read, cache_bytes=BLOCK * 2 * 8 * 10)  # ten blocks of 8-byte messages (and their frames)
    for start in range(1, BLOCK * 100, BLOCK):
        assert await backlog.frames("trajectory:1", "msgpack", start, start + BLOCK - 1) is not None
    assert backlog._bytes <= backlog.cache_bytes and len(backlog._cache) == 10
    backlog.forget()
    await backlog.frames("trajectory:1", "msgpack", 1, 1)
    assert history.asked == 101
