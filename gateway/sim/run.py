"""`gateway simulate`: a team's clusters at work, lively without flooding, for as long as it runs.

Nothing holds a workload slot for good: a failed sync is retried by the cluster's operator when nobody clicks
Retry Sync, and a failed request ends its workload with one warning line. New work waits while the clusters'
queues are long, so a day's run neither stalls nor piles up.
"""

from __future__ import annotations

import asyncio
import logging
import random

import httpx

from .cluster import SimCluster
from .ingest import describe_failure
from .workloads import PLUGINS, finish_staging, pipeline, transfer, upload

log = logging.getLogger(__name__)

MOLECULES = ["Lysozyme", "Ubiquitin", "KcsA channel", "Lipid bilayer", "Water box", "Graphene sheet", "Copper grain"]
ARRIVALS = (1.5, 4.0)  # simulated seconds between new workloads
BACKLOG_PER_WORKER = 25  # queued jobs a cluster may have per worker before it gets no new work


class Simulation:
    def __init__(
        self,
        gateway_url: str,
        cluster_keys: list[str],
        silent: set[int] | None = None,
        trajectories: list[int] | None = None,
        frames: tuple[int, int] = (20, 60),
        speed: float = 1.0,
        concurrent: int = 3,
        seed: int | None = None,
        sync_fail_rate: float = 0.1,
        operator_delay: tuple[float, float] = (20.0, 60.0),
        staging: dict[int, tuple[str, int | None]] | None = None,
        users: list[int] | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.speed = speed
        self.clusters = [
            SimCluster(
                gateway_url,
                key,
                workers=4,
                speed=speed,
                seed=self.rng.randrange(2**31),
                confirm=int(key.split(".")[0][1:]) not in (silent or set()),
                sync_fail_rate=sync_fail_rate,
                operator_delay=operator_delay,
            )
            for key in cluster_keys
        ]
        self.frames = frames
        self.concurrent = concurrent
        self.known: dict[int, tuple[SimCluster, int]] = {}  # trajectory -> the cluster storing it, its frames
        self.fresh = list(trajectories or [])  # existing trajectories with nothing uploaded yet
        self.staging = dict(staging or {})  # submissions a previous run left staging: carried on to ready
        self.started = 0  # workloads started so far
        self.users = list(users or [])  # the team members who submit uploads and pipeline runs (USER)

    async def run(self) -> None:
        """Produce work until cancelled; then stop the workloads and the clusters, letting sent requests finish."""
        running: set[asyncio.Task[None]] = set()
        try:
            for cluster in self.clusters:
                await cluster.start()
            by_id = {c.cluster_id: c for c in self.clusters}
            for submission_id, (state, cluster_id) in self.staging.items():
                # Only the cluster that staged it may go on (the gateway refuses the others' reports).
                cluster = by_id.get(cluster_id or 0) or self.clusters[submission_id % len(self.clusters)]
                cluster.spawn(
                    finish_staging(cluster, submission_id, state), f"the staging of submission {submission_id}"
                )
            while True:
                if len(running) < self.concurrent and self._free():
                    task = asyncio.create_task(self._one(), name="workload")
                    running.add(task)
                    task.add_done_callback(running.discard)
                    self.started += 1
                await asyncio.sleep(self.rng.uniform(*ARRIVALS) / self.speed)
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            await asyncio.gather(*(cluster.stop() for cluster in self.clusters), return_exceptions=True)

    def _user(self) -> int | None:
        return self.rng.choice(self.users) if self.users else None

    def _free(self) -> list[SimCluster]:
        """The clusters whose queues are short enough for new work (with none, new work waits)."""
        return [c for c in self.clusters if c.backlog() <= BACKLOG_PER_WORKER * c.workers]

    async def _one(self) -> None:
        try:
            roll = self.rng.random()
            free = self._free() or self.clusters
            if self.fresh or not self.known or roll < 0.45:
                cluster = self.rng.choice(free)
                frames = self.rng.randint(*self.frames)
                if self.fresh:
                    trajectory_id = self.fresh.pop(0)
                else:
                    name = f"{self.rng.choice(MOLECULES)} run {self.rng.randint(100, 999)}"
                    trajectory_id = await cluster.create_trajectory(name)
                self.known[trajectory_id] = (cluster, frames)
                await upload(cluster, trajectory_id, frames, staged=True, user_id=self._user())
            elif roll < 0.85:
                trajectory_id, (_, frames) = self.rng.choice(list(self.known.items()))
                plugins = self.rng.sample(PLUGINS, self.rng.randint(1, 3))
                await pipeline(
                    self.rng.choice(free),
                    trajectory_id,
                    frames,
                    plugins,
                    preemptible=self.rng.random() < 0.4,
                    user_id=self._user(),
                )
            else:
                trajectory_id, (cluster, _) = self.rng.choice(list(self.known.items()))
                kind = self.rng.choice(["storage_transfer", "trajectory_transfer", "analysis_transfer"])
                await transfer(cluster, trajectory_id, kind)
        except httpx.HTTPError as exc:  # the gateway refused or was away: this workload ends, the others go on
            log.warning("workload failed: %s", describe_failure(exc))
        except Exception:  # a bug: its traceback is worth the lines, and the simulation still goes on
            log.exception("workload failed")
