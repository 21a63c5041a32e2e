"""Identical reads in flight are made once; a read older than the caller's mark is not shared."""

from __future__ import annotations

import asyncio

import pytest

from gateway.hub.shared import SharedReads


async def test_a_read_is_shared_by_every_caller_ready_before_it_is_sent() -> None:
    """Callers of the same turn of the loop share a read though each took its mark after it was asked for: it
    is sent at the next turn, after all of them (subscribers resuming one after another in one turn)."""
    reads = SharedReads()
    calls = 0

    async def position() -> int:
        nonlocal calls
        calls += 1
        return 42

    first = asyncio.ensure_future(reads.read("pos", position))
    await asyncio.sleep(0)  # its read is asked for, not yet sent
    others = [asyncio.ensure_future(reads.read("pos", position, reads.mark())) for _ in range(5)]
    assert await asyncio.gather(first, *others) == [42] * 6 and calls == 1


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

    sent = asyncio.Event()

    async def position() -> int:
        sent.set()
        await gate.wait()
        return next(answers)

    early = asyncio.create_task(reads.read("pos", position))
    await sent.wait()
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


async def test_callers_too_late_for_the_read_in_flight_share_the_one_made_after_it() -> None:
    """A storm paced by its clients brings a few subscribers each turn of the loop: each too late for the read in
    flight, they wait for the next one, started once it is done, and made once for all of them."""
    reads = SharedReads()
    gates = [asyncio.Event(), asyncio.Event()]
    started: list[int] = []

    async def position() -> int:
        started.append(reads.mark())
        await gates[len(started) - 1].wait()
        return len(started)

    early = asyncio.create_task(reads.read("pos", position))
    while not started:
        await asyncio.sleep(0)
    marks = []
    late = []
    for _ in range(20):  # one arriving per turn of the loop, each after the first read was sent
        marks.append(reads.mark())
        late.append(asyncio.create_task(reads.read("pos", position, marks[-1])))
        await asyncio.sleep(0)
    assert len(started) == 1  # the next read waits for the first
    gates[0].set()
    assert await early == 1
    await asyncio.sleep(0.01)
    assert len(started) == 2 and started[1] > max(marks)  # fresh enough for every one of them
    gates[1].set()
    assert await asyncio.gather(*late) == [2] * 20
