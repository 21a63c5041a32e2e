"""One simulated cluster: workers that run its queued jobs (the queue is gateway.sim.jobs); job reports and live
figures over the ingest API (gateway.sim.ingest, gateway.sim.figures); commands on its feed through the gateway
(gateway.sim.commands: the gateway's URL and its key are all it holds); work that callbacks start, owned by
gateway.sim.background.

Its workers pick the cluster's own queued jobs, run them for realistic durations, fail some (a frame job gets
three attempts: it waits again as `retrying`, then fails for good), and honour Remove and Retry commands,
confirming what they did (unless told never to confirm, as a broken cluster would not). Its operator retries a
failed sync after a while when nobody clicks Retry Sync, so an unattended demo never stalls on one.

Every delay is in simulated seconds, divided by `speed`; only the pace of requests to the gateway is real time
(the gateway limits each cluster's requests a second, and compressing time must not multiply them).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from ..core.status import after_failure
from . import commands, figures
from .archive import Archive
from .background import Background
from .ingest import IngestClient
from .jobs import FINISHED_KEPT, JobQueue, SimJob

log = logging.getLogger(__name__)

ERRORS = [
    "worker exited with code 137 (out of memory)",
    "frame file is truncated: expected 48,216 atoms, read 31,002",
    "plugin raised ValueError: cutoff radius must be positive",
    "node lost contact with the scheduler",
]
ANALYSIS_SECONDS = 20.0  # simulated seconds an analysis of one frame takes on average (0.5 to 1.5 times this)
# The kinds of render node a simulated cluster offers (declared to the gateway at start); the spot ones are
# preemptible: their nodes may be taken away mid-run.
INSTANCE_TYPES: list[dict[str, Any]] = [
    {"name": "standard", "cores": 4, "memory_gb": 16},
    {"name": "highmem", "cores": 8, "memory_gb": 64},
    {"name": "highcpu", "cores": 32, "memory_gb": 64},
    {"name": "gpu-large", "cores": 32, "memory_gb": 128},
    {"name": "standard-spot", "cores": 4, "memory_gb": 16, "preemptible": True},
    {"name": "highcpu-spot", "cores": 32, "memory_gb": 64, "preemptible": True},
]


def job_seconds(kind: str, rng: random.Random, speed: float) -> float:
    """How long a simulated job of `kind` runs, in real seconds at `speed`. An analysis of a frame is the long work
    (20 s, 4 s at speed 5): a pipeline run lasts minutes, so its estimate reads "about N min left" in the demo's
    first minutes; uploads and transfers stay brisk."""
    base = {"preprocess": 0.4, "rasterize": 1.2, "analysis": ANALYSIS_SECONDS, "artifact_upload": 0.3}.get(kind, 2.0)
    return rng.uniform(0.5, 1.5) * base / speed


@dataclass
class SimCluster:
    gateway_url: str
    key: str
    workers: int = 4
    confirm: bool = True
    fail_rate: float = 0.05
    speed: float = 1.0  # durations are divided by this
    seed: int | None = None
    report_metrics: bool = True
    preempt_rate: float = 0.05  # of runs on preemptible nodes
    sync_fail_rate: float = 0.1  # of staged uploads whose sync to fast storage fails
    operator_delay: tuple[float, float] = (20.0, 60.0)  # simulated seconds before the operator retries a failed sync
    jobs: dict[int, SimJob] = field(default_factory=dict)
    # The commands it acted on (each once), oldest first, and the jobs it did: a command that comes again is
    # confirmed again with these.
    carried_out: dict[str, list[int]] = field(default_factory=dict)
    instance_types: list[dict[str, Any]] = field(default_factory=lambda: list(INSTANCE_TYPES))
    finished_kept: int = FINISHED_KEPT  # finished jobs held whole; older ones are kept in two bytes each

    def __post_init__(self) -> None:
        self.cluster_id = int(self.key.split(".")[0][1:])
        self.rng = random.Random(self.seed)
        self.archive = Archive()  # the finished jobs no longer held whole: a retry brings them back
        self.queue = JobQueue(self.jobs, self.finished_kept, self.archive.keep)
        self.busy = 0  # workers running a job
        self._tasks: list[asyncio.Task[None]] = []
        self._background = Background(self.cluster_id)  # work started by callbacks (downloads, artifact uploads)
        self.ingest = IngestClient(self.gateway_url, self.key, self.cluster_id)
        self.listening = asyncio.Event()
        self.sync_failed: dict[int, asyncio.Event] = {}  # submissions whose sync failed, waiting for a retry
        self.sync_failures = 0  # how many syncs failed so far

    @property
    def http(self) -> httpx.AsyncClient:
        """The cluster's client of the gateway (a test may post through it, or close it without start())."""
        return self.ingest.http

    # -- lifecycle

    async def start(self) -> None:
        if self.instance_types:
            response = await self.ingest.post("/api/ingest/instance-types", {"instance_types": self.instance_types})
            response.raise_for_status()
        self._tasks = [
            asyncio.create_task(commands.listen(self, self.listening), name=f"cluster-{self.cluster_id}-commands")
        ]
        self._tasks += [
            asyncio.create_task(self._worker(), name=f"cluster-{self.cluster_id}-worker") for _ in range(self.workers)
        ]
        self._tasks.append(asyncio.create_task(self.ingest.send_reports(), name=f"cluster-{self.cluster_id}-reports"))
        if self.report_metrics:
            self._tasks.append(asyncio.create_task(figures.report(self), name=f"cluster-{self.cluster_id}-metrics"))
        await asyncio.wait_for(self.listening.wait(), 10)

    async def stop(self) -> None:
        """Stop working, let the requests already sent finish, then close the connections."""
        tasks = [*self._tasks, *self._background.all()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.ingest.aclose()

    def spawn(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Start work that a callback cannot await; stop() ends it, and a failed request is one warning line."""
        self._background.spawn(work, what)

    # -- the platform's side: registering work

    async def create_trajectory(self, name: str) -> int:
        response = await self.ingest.post("/api/ingest/trajectories", {"name": name})
        response.raise_for_status()
        return int(response.json()["id"])

    async def create_analysis(self, trajectory_id: int, plugin: str) -> int:
        response = await self.ingest.post("/api/ingest/analyses", {"trajectory_id": trajectory_id, "plugin": plugin})
        response.raise_for_status()
        return int(response.json()["id"])

    async def create_submission(self, **fields: Any) -> int:
        response = await self.ingest.post("/api/ingest/submissions", fields)
        response.raise_for_status()
        return int(response.json()["id"])

    async def update_submission(self, submission_id: int, **fields: Any) -> None:
        response = await self.ingest.post(f"/api/ingest/submissions/{submission_id}", fields)
        response.raise_for_status()

    async def submit(
        self, reports: list[dict[str, Any]], on_done: Callable[[SimJob], None] | None = None, preemptible: bool = False
    ) -> list[int]:
        """Create jobs (queued) on this cluster, in chunks as an upload arrives; returns their ids."""
        ids: list[int] = []
        for start in range(0, len(reports), 1000):
            chunk = [{"status": "queued", **r} for r in reports[start : start + 1000]]
            response = await self.ingest.post("/api/ingest/jobs", {"jobs": chunk})
            response.raise_for_status()
            for report, result in zip(chunk, response.json()["jobs"]):
                job = self.jobs[result["id"]] = SimJob(
                    result["id"], report["kind"], on_done=on_done, preemptible=preemptible
                )
                self.enqueue(job)
                ids.append(job.id)
        return ids

    async def sync_retried(self, submission_id: int) -> None:
        """Wait until a failed sync is retried: by a person's Retry Sync, or else by the cluster's operator, who
        notices it within `operator_delay` (so a cluster nobody watches, or one whose confirmations never
        arrive, still moves on)."""
        retried = self.sync_failed[submission_id] = asyncio.Event()
        self.sync_failures += 1
        try:
            await asyncio.wait_for(retried.wait(), self.rng.uniform(*self.operator_delay) / self.speed)
        except TimeoutError:
            log.debug("cluster %d: the operator retried the sync of submission %d", self.cluster_id, submission_id)
        finally:
            self.sync_failed.pop(submission_id, None)

    def remember(self, job_id: int, kind: str, attempt: int, status: str) -> None:
        """Keep a job this cluster finished before it restarted, as it keeps those it finishes (a retry brings it
        back)."""
        self.archive.keep(SimJob(job_id, kind, attempt=attempt, status=status))

    def adopt(self, job_id: int, kind: str, attempt: int, status: str, priority: int = 0) -> None:
        """Take up a job this cluster had before it restarted: held, it stays held; else it waits to run again."""
        job = self.jobs[job_id] = SimJob(job_id, kind, attempt=attempt, priority=priority)
        if status == "holding":
            job.status = "holding"
        else:
            self.enqueue(job)

    # -- running work

    def enqueue(self, job: SimJob) -> None:
        self.queue.push(job)

    def backlog(self) -> int:
        """About how many jobs wait for a worker (entries of re-prioritised or removed jobs count until picked)."""
        return len(self.queue)

    def queued_order(self) -> list[int]:
        """The jobs waiting, in the order workers will pick them (holding ones are left alone)."""
        return self.queue.waiting()

    def _duration(self, kind: str) -> float:
        return job_seconds(kind, self.rng, self.speed)

    async def _worker(self) -> None:
        while True:
            job = await self.queue.next()
            job.status = "running"
            job.started_at = time.time()
            run = job.run
            self._report(job)
            self.busy += 1
            try:
                await asyncio.sleep(self._duration(job.kind))
            finally:
                self.busy -= 1
            if job.removed or job.run != run:
                continue  # stopped while it ran (removed, killed or restarted)
            if job.preemptible and self.rng.random() < self.preempt_rate:
                job.status = "preempted"  # its node was taken away: not retried by itself (Retry Preempted does)
                self._report(job)
                self.finish(job)
                continue
            if self.rng.random() < self.fail_rate:
                status, attempt = after_failure(job.attempt)
                if status == "retrying":
                    job.status, job.attempt = "retrying", attempt
                    self._report(job)
                    self.enqueue(job)
                    continue
                job.status = "failed"
                self._report(job, error=self.rng.choice(ERRORS))
            else:
                job.status = "completed"
                self._report(job)
            self.finish(job)
            if job.on_done is not None:
                job.on_done(job)

    def finish(self, job: SimJob) -> None:
        """Hold a finished job whole for a while, then in two bytes (it may be retried): memory stays small all day."""
        self.queue.finish(job)

    def job(self, job_id: int) -> SimJob | None:
        """A job this cluster holds, or one it finished long ago, brought back whole (to be retried)."""
        job = self.jobs.get(job_id)
        if job is None:
            job = self.archive.take(job_id)
            if job is not None:
                self.jobs[job_id] = job
        return job

    def _report(self, job: SimJob, error: str | None = None) -> None:
        report: dict[str, Any] = {"id": job.id, "attempt": job.attempt, "status": job.status}
        if error is not None:
            report["error"] = error
        if job.status in ("completed", "failed", "preempted") and job.started_at is not None:
            # Its `running` may be folded into the same batch: the start goes with the end.
            report["started_at"] = datetime.fromtimestamp(job.started_at, UTC).isoformat()
        self.ingest.report(report)

    async def flushed(self) -> None:
        """Wait until every report so far has been handed to the gateway."""
        await self.ingest.flushed()
