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


LAG_METRIC = "gateway_event_loop_lag_seconds_bucket"


def lag_buckets(base_url: str) -> dict[float, float]:
    """The node's event-loop lag histogram now: cumulative count per bucket bound (seconds; inf for +Inf)."""
    buckets: dict[float, float] = {}
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(LAG_METRIC + "{"):
                bound = line.split('le="', 1)[1].split('"', 1)[0]
                buckets[float("inf") if bound == "+Inf" else float(bound)] = float(line.rsplit(" ", 1)[1])
    return buckets


def lag_figures(before: dict[float, float], after: dict[float, float]) -> dict[str, Any]:
    """Between two readings: how many 50 ms timers fired, the bound under which 99 % of them fired late, and how
    many were late by more than 100 ms."""
    counts = {bound: after[bound] - before.get(bound, 0.0) for bound in sorted(after)}
    total = counts.get(float("inf"), 0.0)
    if not total:
        return {"ticks": 0, "p99_under_ms": None, "over_100ms": 0}
    p99 = next(bound for bound, count in counts.items() if count >= total * 0.99)
    over = total - max((count for bound, count in counts.items() if bound <= 0.1), default=0.0)
    return {
        "ticks": int(total),
        "p99_under_ms": None if p99 == float("inf") else round(p99 * 1000, 1),
        "over_100ms": int(over),
    }
