"""Identical reads in flight are made once; a read older than the caller's mark is not shared."""

from __future__ import annotations

import asyncio

import pytest

from gateway.hub.shared import SharedReads


async def test_concurrent_identical_reads_are_made_once() -> None:
    reads = SharedReads()
    calls = 0
    gate = asyncio.Event()

    async def position() -> int:
        nonlocal calls
        calls += 1
        await gate.wait()
        return 42

    waiters = [asyncio.create_task(reads.read("pos", position)) for _ in range(50)]
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*waiters) == [42] * 50 and calls == 1
    assert await reads.read("pos", position) == 42 and calls == 2  # done reads are not cached


async def test_a_read_that_started_before_the_caller_was_ready_is_not_shared() -> None:
    reads = SharedReads()
    gate = asyncio.Event()
    answers = iter([1, 2])

    async def position() -> int:
        await gate.wait()
        return next(answers)

    early = asyncio.create_task(reads.read("pos", position))
    await asyncio.sleep(0)
    since = reads.mark()  # this caller began buffering after the first read was sent
    late = asyncio.create_task(reads.read("pos", position, since))
    await asyncio.sleep(0)
    gate.set()
    assert {await early, await late} == {1, 2}  # two reads, not one shared


async def test_one_caller_cancelled_does_not_cancel_the_others_and_errors_reach_everyone() -> None:
    reads = SharedReads()
    gate = asyncio.Event()

    async def failing() -> int:
        await gate.wait()
        raise OSError("redis went away")

    first = asyncio.create_task(reads.read("k", failing))
    second = asyncio.create_task(reads.read("k", failing))
    await asyncio.sleep(0)
    first.cancel()
    gate.set()
    with pytest.raises(OSError):
        await second
    with pytest.raises(asyncio.CancelledError):
        await first
