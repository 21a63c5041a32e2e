"""Partition ownership (gateway.relay.ownership) against a real PostgreSQL: locks, standing by, sharing.

The relays here serve nothing: what serves a partition only records that it holds it, until it is told to stop.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from gateway.relay.ownership import HeldLock, LostLock, Sharing, take_or_wait, try_take
from gateway.store import partitions
from harness.waiting import eventually


class Holding:
    """Serves a partition by holding its lock until cancelled (as a relay does until it loses it)."""

    def __init__(self, name: str, partition: int, held: dict[int, str]) -> None:
        self.name = name
        self.partition = partition
        self.held = held

    async def serve_once(self, lock: HeldLock) -> None:
        assert lock.partition == self.partition
        self.held[self.partition] = self.name
        try:
            await asyncio.Event().wait()
        finally:
            if self.held.get(self.partition) == self.name:
                del self.held[self.partition]
            lock.release()


async def test_a_partition_s_lock_is_held_by_one_relay_and_taken_at_once_when_it_is_released(url: str) -> None:
    first = await try_take(url, 0)
    assert first is not None
    assert await try_take(url, 0) is None  # another relay stands by
    standby = asyncio.create_task(take_or_wait(url, 0))
    await asyncio.sleep(0.3)
    assert not standby.done()
    first.release()
    second = await asyncio.wait_for(standby, 10)
    try:
        await second.prove()
        with pytest.raises(LostLock):
            await first.prove()  # its session is gone
    finally:
        second.release()


async def test_relays_share_the_partitions_and_take_over_those_of_a_relay_that_leaves(url: str) -> None:
    held: dict[int, str] = {}

    def sharing(name: str) -> asyncio.Task[None]:
        share = Sharing(url, 4, lambda p: Holding(name, p, held), {})
        return asyncio.create_task(share.run(), name=f"sharing-{name}")

    a = sharing("a")
    b = sharing("b")
    try:
        await eventually(lambda: sorted(held.values()) == ["a", "a", "b", "b"])
        db = await partitions.member_connection(url)
        try:
            assert await partitions.count_relays(db) == 3  # a's, b's and this one
            assert await partitions.held_partitions(db) >= {0, 1, 2, 3}
        finally:
            await db.close()
        b.cancel()
        await asyncio.gather(b, return_exceptions=True)
        await eventually(lambda: sorted(held.values()) == ["a", "a", "a", "a"])
    finally:
        for task in (a, b):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_stopped_session_ends_even_if_its_work_loses_a_cancellation(url: str) -> None:
    """On Python 3.11 a cancellation that meets an inner timeout at the same moment can be lost inside the work,
    which then runs on. A stopped relay held its lock that way until it was killed, 10 s later: the session
    cancels its work until it ends."""
    lock = await try_take(url, 0)
    assert lock is not None
    ended = asyncio.Event()

    async def work_that_loses_one_cancellation() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            asyncio.current_task().uncancel()  # type: ignore[union-attr]  # as the race inside leaves it
        try:
            await asyncio.Event().wait()  # runs on, until cancelled again
        finally:
            ended.set()

    session = asyncio.create_task(lock.hold_while(work_that_loses_one_cancellation()))
    await asyncio.sleep(0.1)
    session.cancel()
    await asyncio.wait_for(asyncio.gather(session, return_exceptions=True), 10)
    assert ended.is_set()
    lock.release()
    successor = await try_take(url, 0)  # the lock is free at once
    assert successor is not None
    successor.release()
