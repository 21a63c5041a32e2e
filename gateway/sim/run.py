"""`gateway simulate`: a team's clusters at work, lively without flooding."""

from __future__ import annotations

import asyncio
import logging
import random

from .cluster import SimCluster
from .workloads import PLUGINS, pipeline, transfer, upload

log = logging.getLogger(__name__)

MOLECULES = ["Lysozyme", "Ubiquitin", "KcsA channel", "Lipid bilayer", "Water box", "Graphene sheet", "Copper grain"]


class Simulation:
    def __init__(
        self,
        gateway_url: str,
        redis_url: str,
        cluster_keys: list[str],
        silent: set[int] | None = None,
        trajectories: list[int] | None = None,
        frames: tuple[int, int] = (20, 60),
        speed: float = 1.0,
        concurrent: int = 3,
        seed: int | None = None,
        redis_cluster: bool = False,
    ) -> None:
        self.rng = random.Random(seed)
        self.clusters = [
            SimCluster(gateway_url, redis_url, key, workers=4, speed=speed, seed=self.rng.randrange(2**31),
                       confirm=int(key.split(".")[0][1:]) not in (silent or set()), redis_cluster=redis_cluster)
            for key in cluster_keys
        ]
        self.frames = frames
        self.concurrent = concurrent
        self.known: dict[int, tuple[SimCluster, int]] = {}  # trajectory -> the cluster storing it, its frames
        self.fresh = list(trajectories or [])  # existing trajectories with nothing uploaded yet

    async def run(self) -> None:
        for cluster in self.clusters:
            await cluster.start()
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                if len(running) < self.concurrent:
                    task = asyncio.create_task(self._one())
                    running.add(task)
                    task.add_done_callback(running.discard)
                await asyncio.sleep(self.rng.uniform(1.5, 4.0))
        finally:
            for task in running:
                task.cancel()
            for cluster in self.clusters:
                await cluster.stop()

    async def _one(self) -> None:
        try:
            roll = self.rng.random()
            if self.fresh or not self.known or roll < 0.45:
                cluster = self.rng.choice(self.clusters)
                frames = self.rng.randint(*self.frames)
                if self.fresh:
                    trajectory_id = self.fresh.pop(0)
                else:
                    name = f"{self.rng.choice(MOLECULES)} run {self.rng.randint(100, 999)}"
                    trajectory_id = await cluster.create_trajectory(name)
                self.known[trajectory_id] = (cluster, frames)
                await upload(cluster, trajectory_id, frames, staged=True)
            elif roll < 0.85:
                trajectory_id, (_, frames) = self.rng.choice(list(self.known.items()))
                plugins = self.rng.sample(PLUGINS, self.rng.randint(1, 3))
                await pipeline(self.rng.choice(self.clusters), trajectory_id, frames, plugins, preemptible=self.rng.random() < 0.4)
            else:
                trajectory_id, (cluster, _) = self.rng.choice(list(self.known.items()))
                kind = self.rng.choice(["storage_transfer", "trajectory_transfer", "analysis_transfer"])
                await transfer(cluster, trajectory_id, kind)
        except Exception:  # one failed workload must not stop the simulation
            log.exception("workload failed")
