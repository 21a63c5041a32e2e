"""The latency histogram: Prometheus' `le` buckets, cumulative, with +Inf last."""

from __future__ import annotations

from gateway.core.histogram import Histogram


def test_a_value_on_a_bound_counts_in_that_bucket() -> None:
    h = Histogram((0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 1.0, 7.0):
        h.observe(value)
    assert h.buckets() == [("0.1", 2.0), ("1.0", 4.0), ("+Inf", 5.0)]
    assert h.count == 5 and abs(h.sum - 8.65) < 1e-9


def test_an_empty_histogram_has_every_bucket_at_zero() -> None:
    assert Histogram((0.5,)).buckets() == [("0.5", 0.0), ("+Inf", 0.0)]
