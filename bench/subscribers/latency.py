"""Latency histograms of the benchmark's subscribers: exact bucket counts that merge across processes."""

from __future__ import annotations

import math


class Histogram:
    """Latencies in milliseconds, bucketed by microsecond: exact below 256 µs, then 128 buckets per power of
    two (a bucket's midpoint is within 0.4 % of any value in it). Mergeable: bucket counts add up.
    Count, sum, min and max are exact; negative latencies (clock skew) land in bucket 0 and are counted."""

    __slots__ = ("counts", "count", "total", "min", "max", "negative")

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.negative = 0

    def __getstate__(self) -> tuple:
        return (self.counts, self.count, self.total, self.min, self.max, self.negative)

    def __setstate__(self, s: tuple) -> None:
        self.counts, self.count, self.total, self.min, self.max, self.negative = s

    def add(self, ms: float) -> None:
        us = int(ms * 1000.0)
        if us < 256:
            if us < 0:
                self.negative += 1
                us = 0
            i = us
        else:
            e = us.bit_length() - 8
            i = 256 + ((e - 1) << 7) + ((us >> e) - 128)
        c = self.counts
        if i >= len(c):
            c.extend([0] * (i + 1 - len(c)))
        c[i] += 1
        self.count += 1
        self.total += ms
        if ms > self.max:
            self.max = ms
        if ms < self.min:
            self.min = ms

    def merge(self, other: Histogram) -> Histogram:
        c, o = self.counts, other.counts
        if len(o) > len(c):
            c.extend([0] * (len(o) - len(c)))
        for i, v in enumerate(o):
            if v:
                c[i] += v
        self.count += other.count
        self.total += other.total
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.negative += other.negative
        return self

    @staticmethod
    def _midpoint_us(i: int) -> float:
        if i < 256:
            return i + 0.5
        k = i - 256
        e = (k >> 7) + 1
        low = ((k & 127) + 128) << e
        return low + (1 << e) / 2

    def percentile(self, q: float) -> float | None:
        """The q-th percentile (0 < q <= 100) in milliseconds; None when empty."""
        if not self.count:
            return None
        if q >= 100:
            return self.max
        rank = max(1, math.ceil(q / 100 * self.count))
        seen = 0
        for i, v in enumerate(self.counts):
            seen += v
            if seen >= rank:
                return min(max(self._midpoint_us(i) / 1000.0, self.min), self.max)
        return self.max

    def summary(self) -> dict[str, float | int | None]:
        """count, mean, p50, p90, p99, p99.9, min, max (ms), negative."""
        if not self.count:
            return {
                "count": 0,
                "mean": None,
                "p50": None,
                "p90": None,
                "p99": None,
                "p999": None,
                "min": None,
                "max": None,
                "negative": 0,
            }
        return {
            "count": self.count,
            "mean": self.total / self.count,
            "p50": self.percentile(50),
            "p90": self.percentile(90),
            "p99": self.percentile(99),
            "p999": self.percentile(99.9),
            "min": self.min,
            "max": self.max,
            "negative": self.negative,
        }
