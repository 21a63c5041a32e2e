"""Keepalive rounds spread over their interval.

Each connection is pinged once an interval, but on its own slice of it: the connections are dealt in turn to
`slices` slices, and each tick pings one slice. One round for all, every 20 s, would write 16,000 pings in a
single turn of the event loop (and read 16,000 pongs just after), a pause of a few hundred milliseconds that
every delivery on the node waits behind, and a spike that a measure window either holds or misses.

A connection's next ping comes one whole interval after its last, as it did in a single round, so "not
answered by the next ping" still means the same time.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

TICK = 0.1  # seconds between slices: a 20 s interval pings a two-hundredth of the connections at a time
MAX_SLICES = 200


class Pinged(Protocol):
    # Which slice holds it (-1: none). Kept on the connection itself: a map from connection to slice would add
    # about 100 bytes to each of 16,000 idle connections.
    keepalive_slice: int


T = TypeVar("T", bound=Pinged)


def slices_for(interval: float) -> int:
    """As many slices as ticks fit in the interval (at least one, at most MAX_SLICES)."""
    return max(1, min(MAX_SLICES, int(interval / TICK)))


class KeepaliveSlices(Generic[T]):
    def __init__(self, slices: int) -> None:
        self._slices: list[set[T]] = [set() for _ in range(slices)]
        self._dealt = 0  # the slice the next connection joins: dealt in turn, so slices stay even as they come
        self._due = 0  # the slice the next tick pings

    def __len__(self) -> int:
        return sum(map(len, self._slices))

    @property
    def slices(self) -> int:
        return len(self._slices)

    def add(self, item: T) -> None:
        if item.keepalive_slice >= 0:
            return
        index = self._dealt
        self._dealt = (index + 1) % len(self._slices)
        self._slices[index].add(item)
        item.keepalive_slice = index

    def discard(self, item: T) -> None:
        if item.keepalive_slice >= 0:
            self._slices[item.keepalive_slice].discard(item)
            item.keepalive_slice = -1

    def due(self) -> list[T]:
        """The next slice's connections, to ping now; the tick after pings the slice after."""
        index = self._due
        self._due = (index + 1) % len(self._slices)
        return list(self._slices[index])
