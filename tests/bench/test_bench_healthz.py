"""bench.healthz reads a node's histograms from its /metrics text: the loop's lag and the collector's pauses."""

from __future__ import annotations

from bench.healthz import histograms, lag_figures, pause_figures
from gateway.core.histogram import Histogram
from gateway.web.node.garbage import PAUSE_BOUNDS
from gateway.web.node.loop_lag import LAG_BOUNDS


def exposition(lags: list[float], pauses: list[list[float]]) -> str:
    """What a node's /metrics says after these lags and these pauses (by generation), in Prometheus' text."""
    from prometheus_client.core import HistogramMetricFamily
    from prometheus_client.exposition import generate_latest
    from prometheus_client.registry import Collector, CollectorRegistry

    lag = Histogram(LAG_BOUNDS)
    for late in lags:
        lag.observe(late)
    by_generation = []
    for generation in pauses:
        h = Histogram(PAUSE_BOUNDS)
        for pause in generation:
            h.observe(pause)
        by_generation.append(h)

    class Node(Collector):
        def collect(self):  # type: ignore[no-untyped-def]
            yield HistogramMetricFamily("gateway_event_loop_lag_seconds", "", buckets=lag.buckets(), sum_value=lag.sum)
            family = HistogramMetricFamily("gateway_gc_pause_seconds", "", labels=["generation"])
            for g, h in enumerate(by_generation):
                family.add_metric([str(g)], h.buckets(), h.sum)
            yield family

    registry = CollectorRegistry()
    registry.register(Node())
    return generate_latest(registry).decode()


def test_the_pauses_and_lags_between_two_readings_are_counted() -> None:
    before = histograms(exposition([0.001] * 10, [[0.0005] * 5, [0.002], []]))
    after = histograms(exposition([0.001] * 10 + [0.003] * 97 + [0.2] * 3, [[0.0005] * 50, [0.002, 0.03, 0.07], [0.4]]))
    assert lag_figures(before, after) == {"ticks": 100, "p99_under_ms": 250.0, "over_100ms": 3}
    assert pause_figures(before, after) == {
        "0": {"passes": 45, "over_50ms": 0, "longest_under_ms": 1.0},
        "1": {"passes": 2, "over_50ms": 1, "longest_under_ms": 100.0},
        "2": {"passes": 1, "over_50ms": 1, "longest_under_ms": 500.0},
    }


def test_a_node_without_a_pass_reads_as_none() -> None:
    nothing = histograms(exposition([], [[], [], []]))
    assert pause_figures(nothing, nothing)["2"] == {"passes": 0, "over_50ms": 0, "longest_under_ms": None}
    assert lag_figures(nothing, nothing) == {"ticks": 0, "p99_under_ms": None, "over_100ms": 0}
