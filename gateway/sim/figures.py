"""A simulated cluster's live figures, posted to the gateway about once a simulated second: CPU follows how many
workers are busy; memory, disk and network wander plausibly (a disk fills and frees)."""

from __future__ import annotations

import asyncio
import random
from typing import Protocol

import httpx

from .ingest import REPORT_EVERY, IngestClient

METRICS_EVERY = 1.0  # simulated seconds, but never more often than REPORT_EVERY


class Cluster(Protocol):
    """What reporting figures needs of a simulated cluster (gateway.sim.cluster.SimCluster is one)."""

    rng: random.Random
    busy: int  # workers running a job
    workers: int
    speed: float
    ingest: IngestClient


class Wander:
    """Memory and disk as they move from one report to the next. A disk fills while workers write frames and frees
    as finished jobs' scratch data is cleaned up (now and then all at once, as an operator would), so it never
    sits at 99 % for good."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.memory, self.disk = rng.uniform(30, 60), rng.uniform(20, 70)

    def step(self, busy: int, workers: int) -> dict[str, float]:
        rng = self.rng
        cpu = min(100.0, 8 + 90 * busy / max(1, workers) + rng.uniform(-4, 4))
        self.memory = min(95.0, max(10.0, self.memory + rng.uniform(-2, 2)))
        self.disk = min(95.0, max(15.0, self.disk + (rng.uniform(0, 0.08) if busy else -rng.uniform(0, 0.3))))
        if self.disk >= 90.0 and rng.random() < 0.02:
            self.disk -= rng.uniform(20, 40)
        return {
            "cpu": round(max(0.0, cpu), 1),
            "memory": round(self.memory, 1),
            "disk": round(self.disk, 1),
            "network": round(busy * rng.uniform(5, 40), 1),
        }


async def report(cluster: Cluster) -> None:
    """Post the cluster's figures until cancelled."""
    wander = Wander(cluster.rng)
    while True:
        figures = wander.step(cluster.busy, cluster.workers)
        try:
            await cluster.ingest.post("/api/ingest/metrics", figures)
        except httpx.HTTPError:
            pass  # the next figures replace these anyway
        await asyncio.sleep(max(METRICS_EVERY / cluster.speed, REPORT_EVERY))
