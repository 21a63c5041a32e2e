"""The per-user socket limit across processes (gateway.core.user_sockets) and a node's share of it
(gateway.hub.user_sockets.SocketsHeld), on the memory bus."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.bus.memory import MemoryBroker
from gateway.core.user_sockets import within_limit
from gateway.hub.user_sockets import TTL, SocketsHeld
from tests.unit.test_broker_memory import ShiftedClock


def test_live_records_of_other_processes_count_and_this_process_s_count_replaces_its_own() -> None:
    records = {"a": (2, 10.0), "b": (1, 10.0), "dead": (5, 4.0)}
    assert within_limit(records, "a", 3, 4, now=5.0)  # 3 here (its record of 2 replaced) + 1 in b
    assert not within_limit(records, "a", 4, 4, now=5.0)
    assert within_limit(records, "c", 1, 4, now=5.0)
    assert not within_limit(records, "c", 2, 4, now=5.0)
    assert within_limit(records, "c", 4, 4, now=10.0)  # at its lapse time a record no longer counts


async def test_two_processes_hold_no_more_than_the_limit_between_them_and_a_release_frees_a_place() -> None:
    broker = MemoryBroker()
    first, second = SocketsHeld(broker.user_sockets, 3), SocketsHeld(broker.user_sockets, 3)
    assert [await first.claim(7) for _ in range(2)] == [True, True]
    assert [await second.claim(7) for _ in range(2)] == [True, False]
    assert first.held[7] == 2 and second.held[7] == 1  # a refused claim is not counted
    first.release(7)
    await first.written()
    assert await second.claim(7)
    assert not await first.claim(7)


async def test_a_process_that_stops_renewing_stops_counting() -> None:
    clock = ShiftedClock()
    broker = MemoryBroker(clock=clock)
    dead, alive = SocketsHeld(broker.user_sockets, 2), SocketsHeld(broker.user_sockets, 2)
    assert await dead.claim(7) and await dead.claim(7)
    assert not await alive.claim(7)
    clock.offset += TTL + 1
    assert await alive.claim(7)


async def test_while_the_bus_is_down_a_node_judges_by_its_own_count_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broker = MemoryBroker()
    held = SocketsHeld(broker.user_sockets, 2)
    broker.lose_connection()
    with caplog.at_level(logging.INFO, "gateway.hub.user_sockets"):
        assert [await held.claim(7) for _ in range(3)] == [True, True, False]
        broker.restore_connection()
        held.release(7)
        await held.written()
        assert await held.claim(7)
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]


async def test_sockets_ending_together_are_written_in_one_round_trip_with_their_counts() -> None:
    """A thousand clients leaving for another node: one write, not a thousand writes and tasks at once (they
    grew the Redis pool to its bound and the node's memory with it)."""
    broker = MemoryBroker()
    held, other = SocketsHeld(broker.user_sockets, 3), SocketsHeld(broker.user_sockets, 3)
    writes: list[dict[int, int]] = []
    record = broker.user_sockets.record

    async def counted(process: str, counts: dict[int, int], ttl: float) -> None:
        writes.append(dict(counts))
        await record(process, counts, ttl)

    broker.user_sockets.record = counted  # type: ignore[method-assign]
    for user in range(100):
        assert await held.claim(user) and await held.claim(user) and await held.claim(user)
    for user in range(100):
        held.release(user)
        held.release(user)
    await held.written()
    assert writes == [dict.fromkeys(range(100), 1)]
    assert all([await other.claim(user) for user in range(100)])  # the places are free for the other process
    assert await other.claim(0) and not await other.claim(0)  # 1 left here and 2 there: the limit of 3


class CountedClaims:
    """The memory bus's claims, counted, each answered only once `open` is set."""

    def __init__(self, broker: MemoryBroker) -> None:
        self.claim = broker.user_sockets.claim
        self.counts: list[int] = []
        self.open = asyncio.Event()
        self.open.set()
        broker.user_sockets.claim = self.counted  # type: ignore[method-assign]

    async def counted(self, process: str, user_id: int, count: int, limit: int, ttl: float) -> bool:
        self.counts.append(count)
        await self.open.wait()
        return await self.claim(process, user_id, count, limit, ttl)


async def test_a_user_s_sockets_claimed_together_are_claimed_in_one_round_trip() -> None:
    """A storm of one user's sockets (a tool's feeds, the bench's subscribers): one claim on the bus, not one
    per socket."""
    broker = MemoryBroker()
    claims = CountedClaims(broker)
    held = SocketsHeld(broker.user_sockets, 100)
    assert await asyncio.gather(*[held.claim(7) for _ in range(50)]) == [True] * 50
    assert claims.counts == [50] and held.held[7] == 50


async def test_claims_made_while_one_is_on_its_way_go_next_together_and_count_on_from_it() -> None:
    broker = MemoryBroker()
    claims = CountedClaims(broker)
    held = SocketsHeld(broker.user_sockets, 100)
    claims.open.clear()
    first = asyncio.ensure_future(held.claim(7))
    while not claims.counts:
        await asyncio.sleep(0)
    later = [asyncio.ensure_future(held.claim(7)) for _ in range(10)]
    await asyncio.sleep(0.01)
    claims.open.set()
    assert await first and await asyncio.gather(*later) == [True] * 10
    assert claims.counts == [1, 11]


async def test_a_batch_that_does_not_fit_whole_grants_the_first_claims_up_to_the_limit() -> None:
    broker = MemoryBroker()
    claims = CountedClaims(broker)
    held, other = SocketsHeld(broker.user_sockets, 5), SocketsHeld(broker.user_sockets, 5)
    assert await other.claim(7)
    assert await asyncio.gather(*[held.claim(7) for _ in range(9)]) == [True] * 4 + [False] * 5
    assert held.held[7] == 4  # refused claims are not counted
    assert len(claims.counts) <= 5  # the batch, then halves: not one per claim
    assert not await other.claim(7) and await asyncio.gather(held.claim(8), held.claim(8)) == [True, True]
