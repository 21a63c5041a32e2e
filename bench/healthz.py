"""`/healthz` latency of a node while something happens to it (a storm, a neighbour's restart), polled from a
process of its own so that the harness's event loop and GIL stay out of the figure."""

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
    while not pipe.poll(interval):
        sent = time.time()
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                response.read()
            samples.append((sent, time.perf_counter() - started))
        except (OSError, urllib.error.URLError):
            samples.append((sent, None))
    pipe.send(samples)


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

    async def stop(self) -> Samples:
        self._pipe.send("stop")
        samples: Samples = await asyncio.to_thread(self._pipe.recv)
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
