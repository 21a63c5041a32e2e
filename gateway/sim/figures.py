"""A simulated cluster's live figures, posted to the gateway about once a simulated second: CPU follows how many
workers are busy; memory, disk and network wander plausibly."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx

from .ingest import REPORT_EVERY

if TYPE_CHECKING:
    from .cluster import SimCluster

METRICS_EVERY = 1.0  # simulated seconds, but never more often than REPORT_EVERY


async def report(cluster: SimCluster) -> None:
    """Post the cluster's figures until cancelled."""
    rng = cluster.rng
    memory, disk = rng.uniform(30, 60), rng.uniform(20, 70)
    while True:
        busy = cluster.busy
        cpu = min(100.0, 8 + 90 * busy / max(1, cluster.workers) + rng.uniform(-4, 4))
        memory = min(95.0, max(10.0, memory + rng.uniform(-2, 2)))
        disk = min(99.0, disk + rng.uniform(0, 0.05))
        network = round(busy * rng.uniform(5, 40), 1)
        figures = {
            "cpu": round(max(0.0, cpu), 1),
            "memory": round(memory, 1),
            "disk": round(disk, 1),
            "network": network,
        }
        try:
            await cluster.ingest.post("/api/ingest/metrics", figures)
        except httpx.HTTPError:
            pass  # the next figures replace these anyway
        await asyncio.sleep(max(METRICS_EVERY / cluster.speed, REPORT_EVERY))
