"""How responsive a node stays while something happens to it (a storm, a neighbour's restart): its `/healthz`
latency, polled from a process of its own so that the harness's event loop and GIL stay out of the figure, and
how late its own event loop ran meanwhile (`gateway_event_loop_lag_seconds` on its /metrics)."""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
import urllib.error
import urllib.request
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

PROBE_INTERVAL = 0.05  # 20 polls a second

Samples = list[tuple[float, float | None]]  # (time.time() sent, seconds to the answer; None: failed)


def _probe_main(url: str, interval: float, pipe: Any) -> None:
    samples: Samples = []
    failures: dict[str, int] = {}  # why polls went unanswered
    while not pipe.poll(interval):
        sent = time.time()
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                response.read()
            samples.append((sent, time.perf_counter() - started))
        except (OSError, urllib.error.URLError) as exc:
            samples.append((sent, None))
            reason = getattr(exc, "reason", exc)
            why = f"{type(reason).__name__}: {reason}"[:120]
            failures[why] = failures.get(why, 0) + 1
    pipe.send((samples, failures))


class HealthProbe:
    """Polls `base_url`/healthz until `stop()`, which returns every sample."""

    def __init__(self, base_url: str, interval: float = PROBE_INTERVAL) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._pipe, child = ctx.Pipe()
        self._proc = ctx.Process(
            target=_probe_main, args=(f"{base_url}/healthz", interval, child), daemon=True, name="healthz-probe"
        )
        self._proc.start()
        child.close()
        self.failures: dict[str, int] = {}  # why polls went unanswered, after stop()

    async def stop(self) -> Samples:
        self._pipe.send("stop")
        samples, self.failures = await asyncio.to_thread(self._pipe.recv)
        await asyncio.to_thread(self._proc.join, 10)
        return samples


def latency_figures(samples: Samples, since: float, until: float) -> dict[str, Any]:
    """The /healthz answers sent between `since` and `until` (time.time()): their peak, p99 and median (ms)."""
    within = [s for s in samples if since <= s[0] <= until]
    answered = sorted(latency * 1000 for _, latency in within if latency is not None)
    if not answered:
        return {"polls": len(within), "failed": len(within), "peak_ms": None, "p99_ms": None, "p50_ms": None}
    return {
        "polls": len(within),
        "failed": len(within) - len(answered),
        "peak_ms": round(answered[-1], 1),
        "p99_ms": round(answered[min(len(answered) - 1, int(len(answered) * 0.99))], 1),
        "p50_ms": round(statistics.median(answered), 1),
    }


LAG_METRIC = "gateway_event_loop_lag_seconds"
PAUSE_METRIC = "gateway_gc_pause_seconds"
Buckets = dict[float, float]  # cumulative count per bucket bound (seconds; inf for +Inf)


def node_histograms(base_url: str) -> dict[str, Buckets]:
    """The node's event-loop lag (`loop`) and its collector's pauses by generation (`gc0`, `gc1`, `gc2`) now."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as response:
        return histograms(response.read().decode())


def histograms(exposition: str) -> dict[str, Buckets]:
    """`node_histograms` from the text of a /metrics answer."""
    read: dict[str, Buckets] = {}
    for family in text_string_to_metric_families(exposition):
        if family.name not in (LAG_METRIC, PAUSE_METRIC):
            continue
        for sample in family.samples:
            if sample.name.endswith("_bucket"):
                name = "loop" if family.name == LAG_METRIC else "gc" + sample.labels["generation"]
                read.setdefault(name, {})[float(sample.labels["le"])] = sample.value
    return read


def _between(before: Buckets, after: Buckets) -> tuple[dict[float, float], float]:
    counts = {bound: after[bound] - before.get(bound, 0.0) for bound in sorted(after)}
    return counts, counts.get(float("inf"), 0.0)


def _over(counts: dict[float, float], total: float, limit: float) -> int:
    return int(total - max((count for bound, count in counts.items() if bound <= limit), default=0.0))


def lag_figures(before: dict[str, Buckets], after: dict[str, Buckets]) -> dict[str, Any]:
    """Between two readings: how many 50 ms timers fired, the bound under which 99 % of them fired late, and how
    many were late by more than 100 ms."""
    counts, total = _between(before.get("loop", {}), after.get("loop", {}))
    if not total:
        return {"ticks": 0, "p99_under_ms": None, "over_100ms": 0}
    p99 = next(bound for bound, count in counts.items() if count >= total * 0.99)
    return {
        "ticks": int(total),
        "p99_under_ms": None if p99 == float("inf") else round(p99 * 1000, 1),
        "over_100ms": _over(counts, total, 0.1),
    }


def pause_figures(before: dict[str, Buckets], after: dict[str, Buckets]) -> dict[str, Any]:
    """Between two readings, per generation of the collector: its passes, how many stopped the node for over
    50 ms, and the bound the longest stayed under (None: past the last bound, or no pass)."""
    figures: dict[str, Any] = {}
    for generation in ("0", "1", "2"):
        counts, total = _between(before.get("gc" + generation, {}), after.get("gc" + generation, {}))
        longest = next((bound for bound, count in counts.items() if total and count >= total), None)
        figures[generation] = {
            "passes": int(total),
            "over_50ms": _over(counts, total, 0.05),
            "longest_under_ms": None if longest in (None, float("inf")) else round(longest * 1000, 1),
        }
    return figures
