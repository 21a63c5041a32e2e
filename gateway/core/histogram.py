"""A latency histogram cheap enough to observe every message: a bisect and two additions, no lock.

prometheus_client's own Histogram takes a lock per observation; the gateway observes from one event loop
only, and its collectors turn these counts into Prometheus' cumulative buckets at scrape time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable

# Seconds: from a fraction of a millisecond (a node writing what Redis just handed it) to the tens of seconds
# a relay held back by an open transaction may take.
LATENCY_BOUNDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Histogram:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Iterable[float] = LATENCY_BOUNDS) -> None:
        self.bounds = tuple(sorted(bounds))
        self.counts = [0] * (len(self.bounds) + 1)  # the last one: above every bound
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bound >= value: Prometheus' `le`
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative counts per upper bound, `+Inf` last (as prometheus_client's HistogramMetricFamily takes them)."""
        out: list[tuple[str, float]] = []
        total = 0
        for bound, n in zip((*self.bounds, float("inf")), self.counts):
            total += n
            out.append(("+Inf" if bound == float("inf") else repr(bound), float(total)))
        return out
