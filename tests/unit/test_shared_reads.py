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


async def test_a_read_asked_to_be_kept_serves_later_callers_that_were_ready_before_it_was_sent(monkeypatch) -> None:
    """A snapshot's page, read for the first of the subscribers that arrived together, serves the others when
    they get there a moment later; not a caller that began buffering after it was sent, and not past `KEEP`."""
    import gateway.hub.shared as shared

    reads = SharedReads()
    calls = 0

    async def page() -> int:
        nonlocal calls
        calls += 1
        return calls

    early = reads.mark()  # began buffering before any read
    assert await reads.read("page", page, early, keep=True) == 1
    assert await reads.read("page", page, early, keep=True) == 1  # done, kept: the same answer, no read
    assert await reads.read("page", page, reads.mark(), keep=True) == 2  # ready only after it was sent: read again
    assert await reads.read("other", page, early) == 3 and await reads.read("other", page, early) == 4  # not kept
    assert reads.kept == 1  # the newer read of "page" replaced the older
    monkeypatch.setattr(shared, "KEEP", 0.0)
    reads._expire()  # what its timer does, once the kept reads are older than KEEP
    assert reads.kept == 0
    assert await reads.read("page", page, early, keep=True) == 5


async def test_a_failed_read_is_not_kept() -> None:
    reads = SharedReads()

    async def failing() -> int:
        raise OSError("PostgreSQL went away")

    with pytest.raises(OSError):
        await reads.read("page", failing, keep=True)
    assert reads.kept == 0
