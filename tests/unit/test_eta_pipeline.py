"""The demo's own pipeline (gateway.sim.workloads.pipeline) at `gateway demo --speed 5`, in simulated time: two
analyses of 48 frames on a cluster's four workers (jobs of 2 to 6 s, the simulator's own durations), each
analysis's artifact upload queued when its last frame is done. A quarter done, within the run's first minute, the
relay's estimate reads a minute or more ("about N min left"), and the rest takes that long within a quarter (the
tolerance docs/jobs-view.md states).

The figures come from the EtaTracker the relay runs, refreshed whenever it says it is due, as the relay refreshes
it; the path from a cluster to the team channel is tested end to end, in real time, by tests/integration/test_eta.py.
"""

from __future__ import annotations

import heapq
import random
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
import pytest

from gateway.core.aggregate import Change
from gateway.core.eta import EtaTracker
from gateway.core.model import Job
from gateway.sim.cluster import job_seconds
from gateway.sim.jobs import SimJob
from gateway.sim.workloads import pipeline

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
TRAJECTORY = 10
FRAMES, PLUGINS, WORKERS, SPEED = 48, ["Polyhedral Template Matching", "Radial Distribution Function"], 4, 5.0
TOTAL = len(PLUGINS) * (FRAMES + 1)  # the analyses' frames, then each one's artifact upload


@dataclass
class Run:
    shown_at: float  # seconds into the run when a quarter was done and a figure was out
    shown: int  # the figure out then, in seconds left
    took: float  # how long the rest took


class Cluster:
    """What `pipeline()` asks of a simulated cluster, in simulated time: its workers take the jobs first come,
    first served; every change goes to the tracker as the outbox would carry it, and the tracker is refreshed
    whenever it says it is due."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.tracker = EtaTracker()
        self.jobs: dict[int, Job] = {}
        self.on_done: dict[int, Callable[[SimJob], None] | None] = {}
        self.queue: deque[int] = deque()
        self.ends: list[tuple[float, int]] = []  # (when it ends, job id) of the running jobs
        self.spawned: list[Coroutine[Any, Any, None]] = []
        self.analyses = 0
        self.now = 0.0
        self.done = 0

    async def create_analysis(self, trajectory_id: int, plugin: str) -> int:
        self.analyses += 1
        return self.analyses

    async def submit(
        self, reports: list[dict[str, Any]], on_done: Callable[[SimJob], None] | None = None, preemptible: bool = False
    ) -> list[int]:
        ids = []
        for report in reports:
            job = Job(
                id=len(self.jobs) + 1,
                team_id=1,
                trajectory_id=report["trajectory_id"],
                cluster_id=1,
                kind=report["kind"],
                name=report["name"],
                status="queued",
                version=1,
                analysis_id=report.get("analysis_id"),
            )
            self.jobs[job.id], self.on_done[job.id] = job, on_done
            self.queue.append(job.id)
            self.tracker.job_changed(Change(old_status=None, new_status="queued", job=job))
            ids.append(job.id)
        return ids

    def spawn(self, work: Coroutine[Any, Any, None], what: str) -> None:
        self.spawned.append(work)

    def move(self, job_id: int, status: str) -> None:
        old = self.jobs[job_id]
        when = T0 + timedelta(seconds=self.now)
        new = msgspec.structs.replace(
            old,
            status=status,
            version=old.version + 1,
            started_at=when if status == "running" else old.started_at,
            finished_at=when if status == "completed" else None,
        )
        self.jobs[job_id] = new
        self.tracker.job_changed(Change(old_status=old.status, new_status=status, job=new))

    async def step(self) -> None:
        """Start what free workers can take, then go to the next refresh or the next job's end, whichever is first."""
        while self.queue and len(self.ends) < WORKERS:
            job_id = self.queue.popleft()
            self.move(job_id, "running")
            heapq.heappush(self.ends, (self.now + job_seconds(self.jobs[job_id].kind, self.rng, SPEED), job_id))
        due = self.tracker.next_due()
        if due is not None and due <= self.ends[0][0]:
            self.now = max(self.now, due)
            self.tracker.refresh(self.now, T0.timestamp() + self.now)
            return
        self.now, job_id = heapq.heappop(self.ends)
        self.move(job_id, "completed")
        self.done += 1
        done = self.on_done[job_id]
        if done is not None:
            done(SimJob(job_id, self.jobs[job_id].kind, status="completed"))
        while self.spawned:
            await self.spawned.pop(0)

    async def run(self) -> Run:
        await pipeline(self, TRAJECTORY, FRAMES, PLUGINS)  # type: ignore[arg-type]  # what it asks of a cluster
        shown: tuple[float, int] | None = None
        while self.done < TOTAL:
            await self.step()
            figure = self.tracker.trajectories.get(TRAJECTORY)
            if shown is None and self.done >= TOTAL // 4 and figure is not None:
                shown = (self.now, figure)
        assert shown is not None, "no figure once a quarter was done"
        return Run(shown[0], shown[1], self.now - shown[0])


@pytest.mark.parametrize("seed", range(20))
async def test_the_demos_pipeline_at_speed_5_reads_minutes_left_a_quarter_in_and_ends_when_it_said(seed: int) -> None:
    run = await Cluster(seed).run()
    assert run.shown_at < 60, "no estimate in the run's first minute"
    assert run.shown >= 60, f"{run.shown} s left reads 'less than a minute left'"
    assert abs(run.shown - run.took) <= 0.25 * run.took, f"{run.shown} s left shown, the rest took {run.took:.1f} s"
