"""Keepalive slices: each connection pinged once a round, a round's pings spread evenly over its ticks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import pytest

from gateway.core.keepalive import MAX_SLICES, KeepaliveSlices, slices_for


class Conn:
    __slots__ = ("name", "keepalive_slice")

    def __init__(self, name: object) -> None:
        self.name = name
        self.keepalive_slice = -1

    def __repr__(self) -> str:
        return f"Conn({self.name!r})"


def conns(names: Iterable[object]) -> dict[object, Conn]:
    return {name: Conn(name) for name in names}


def round_of(slices: KeepaliveSlices[Conn]) -> list[list[object]]:
    return [[c.name for c in slices.due()] for _ in range(slices.slices)]


def test_each_connection_is_pinged_once_a_round_and_no_tick_holds_more_than_its_share() -> None:
    slices = KeepaliveSlices[Conn](200)
    for conn in conns(range(16_000)).values():
        slices.add(conn)
    for _ in range(2):
        ticks = round_of(slices)
        assert Counter(c for tick in ticks for c in tick) == Counter(range(16_000))
        assert max(len(tick) for tick in ticks) == 80


def test_a_connection_pinged_again_comes_a_whole_round_later() -> None:
    slices = KeepaliveSlices[Conn](10)
    slices.due()  # the round has already begun when the connection comes
    slices.add(Conn("late"))
    ticks = [[c.name for c in slices.due()] for _ in range(30)]
    pinged_at = [i for i, tick in enumerate(ticks) if "late" in tick]
    assert len(pinged_at) == 3 and pinged_at[1] - pinged_at[0] == pinged_at[2] - pinged_at[1] == 10


def test_a_connection_that_left_is_not_pinged_and_joining_twice_pings_once() -> None:
    slices = KeepaliveSlices[Conn](4)
    each = conns("abc")
    for name in "abca":
        slices.add(each[name])
    slices.discard(each["b"])
    slices.discard(each["b"])
    slices.discard(Conn("never came"))
    assert len(slices) == 2
    assert sorted(str(c) for tick in round_of(slices) for c in tick) == ["a", "c"]


def test_a_connection_that_left_and_came_back_is_pinged_again() -> None:
    slices = KeepaliveSlices[Conn](3)
    back = Conn("back")
    slices.add(back)
    slices.discard(back)
    slices.add(back)
    assert [c for tick in round_of(slices) for c in tick] == ["back"]


def test_connections_that_come_and_go_leave_the_slices_even() -> None:
    slices = KeepaliveSlices[Conn](20)
    each = conns(range(1_500))
    for n in range(1_000):
        slices.add(each[n])
    for n in range(0, 1_000, 3):
        slices.discard(each[n])
    for n in range(1_000, 1_500):
        slices.add(each[n])
    sizes = [len(tick) for tick in round_of(slices)]
    assert sum(sizes) == len(slices) == 1_166
    assert max(sizes) - min(sizes) <= 2  # newcomers dealt in turn, as the first were


@pytest.mark.parametrize(("interval", "expected"), [(20.0, 200), (1.0, 10), (0.05, 1), (3600.0, MAX_SLICES), (0.25, 2)])
def test_an_interval_is_cut_into_ticks_of_a_tenth_of_a_second(interval: float, expected: int) -> None:
    assert slices_for(interval) == expected
