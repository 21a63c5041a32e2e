"""One simulated cluster: workers that run its queued jobs, reports over the ingest API, commands over Redis.

Its workers pick the cluster's own queued jobs, run them for realistic durations, fail some (a frame job gets
three attempts: it waits again as `retrying`, then fails for good), and honour Remove and Retry commands,
confirming what they did (unless told never to confirm, as a broken cluster would not).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from ..bus import keys
from ..bus.connection import connect
from ..core.control import Confirmation, command_decoder
from ..core.status import after_failure

log = logging.getLogger(__name__)

ERRORS = [
    "worker exited with code 137 (out of memory)",
    "frame file is truncated: expected 48,216 atoms, read 31,002",
    "plugin raised ValueError: cutoff radius must be positive",
    "node lost contact with the scheduler",
]


@dataclass
class SimJob:
    id: int
    kind: str
    attempt: int = 1
    status: str = "queued"
    removed: bool = False
    priority: int = 0
    preemptible: bool = False  # its node may be taken away mid-run
    run: int = 0  # bumps when a run is stopped (kill, retry): a worker finishing an old run drops it
    on_done: Callable[[SimJob], None] | None = None


@dataclass
class SimCluster:
    gateway_url: str
    redis_url: str
    key: str
    workers: int = 4
    confirm: bool = True
    fail_rate: float = 0.05
    speed: float = 1.0  # durations are divided by this
    seed: int | None = None
    report_metrics: bool = True
    preempt_rate: float = 0.05  # of runs on preemptible nodes
    redis_cluster: bool = False
    jobs: dict[int, SimJob] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cluster_id = int(self.key.split(".")[0][1:])
        self.rng = random.Random(self.seed)
        self.queue: list[tuple[int, int, int]] = []  # (-priority, order, job id): higher priority first
        self._order = itertools.count()
        self._work = asyncio.Event()
        self._reports: list[dict[str, Any]] = []
        self._flushed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.http = httpx.AsyncClient(base_url=self.gateway_url, headers={"Authorization": f"Bearer {self.key}"}, timeout=30)
        self.redis = connect(self.redis_url, self.redis_cluster)
        self.listening = asyncio.Event()
        self.sync_failed: dict[int, asyncio.Event] = {}  # submissions whose sync failed, waiting for Retry Sync

    # -- lifecycle

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._listen(), name=f"cluster-{self.cluster_id}-commands")]
        self._tasks += [asyncio.create_task(self._worker(), name=f"cluster-{self.cluster_id}-worker") for _ in range(self.workers)]
        self._tasks.append(asyncio.create_task(self._reporter(), name=f"cluster-{self.cluster_id}-reports"))
        if self.report_metrics:
            self._tasks.append(asyncio.create_task(self._metrics(), name=f"cluster-{self.cluster_id}-metrics"))
        await asyncio.wait_for(self.listening.wait(), 10)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.http.aclose()
        await self.redis.aclose()

    # -- the platform's side: registering work

    async def create_trajectory(self, name: str) -> int:
        response = await self.http.post("/api/ingest/trajectories", json={"name": name})
        response.raise_for_status()
        return int(response.json()["id"])

    async def create_analysis(self, trajectory_id: int, plugin: str) -> int:
        response = await self.http.post("/api/ingest/analyses", json={"trajectory_id": trajectory_id, "plugin": plugin})
        response.raise_for_status()
        return int(response.json()["id"])

    async def create_submission(self, **fields: Any) -> int:
        response = await self.http.post("/api/ingest/submissions", json=fields)
        response.raise_for_status()
        return int(response.json()["id"])

    async def update_submission(self, submission_id: int, **fields: Any) -> None:
        response = await self.http.post(f"/api/ingest/submissions/{submission_id}", json=fields)
        response.raise_for_status()

    async def submit(
        self, reports: list[dict[str, Any]], on_done: Callable[[SimJob], None] | None = None, preemptible: bool = False
    ) -> list[int]:
        """Create jobs (queued) on this cluster, in chunks as an upload arrives; returns their ids."""
        ids: list[int] = []
        for start in range(0, len(reports), 1000):
            chunk = [{"status": "queued", **r} for r in reports[start : start + 1000]]
            response = await self.http.post("/api/ingest/jobs", json={"jobs": chunk})
            response.raise_for_status()
            for report, result in zip(chunk, response.json()["jobs"]):
                job = self.jobs[result["id"]] = SimJob(result["id"], report["kind"], on_done=on_done, preemptible=preemptible)
                self._enqueue(job)
                ids.append(job.id)
            self._work.set()
        return ids

    # -- running work

    def _enqueue(self, job: SimJob) -> None:
        heapq.heappush(self.queue, (-job.priority, next(self._order), job.id))
        self._work.set()

    def queued_order(self) -> list[int]:
        """The jobs waiting, in the order workers will pick them (holding ones are left alone)."""
        return [i for _, _, i in sorted(self.queue) if self.jobs[i].status in ("queued", "retrying") and not self.jobs[i].removed]

    def _duration(self, kind: str) -> float:
        base = {"preprocess": 0.4, "rasterize": 1.2, "analysis": 0.8, "artifact_upload": 0.3}.get(kind, 2.0)
        return self.rng.uniform(0.5, 1.5) * base / self.speed

    async def _worker(self) -> None:
        while True:
            if not self.queue:
                self._work.clear()
                await self._work.wait()
                continue
            priority, order, job_id = heapq.heappop(self.queue)
            job = self.jobs.get(job_id)
            if job is None or job.removed or job.status not in ("queued", "retrying"):
                continue
            if -priority != job.priority:  # re-prioritised while waiting: its newer entry counts
                continue
            job.status = "running"
            run = job.run
            self._report(job)
            await asyncio.sleep(self._duration(job.kind))
            if job.removed or job.run != run:
                continue  # stopped while it ran (removed, killed or restarted)
            if job.preemptible and self.rng.random() < self.preempt_rate:
                job.status = "preempted"  # its node was taken away: not retried by itself (Retry Preempted does)
                self._report(job)
                continue
            if self.rng.random() < self.fail_rate:
                status, attempt = after_failure(job.attempt)
                if status == "retrying":
                    job.status, job.attempt = "retrying", attempt
                    self._report(job)
                    self._enqueue(job)
                    continue
                job.status = "failed"
                self._report(job, error=self.rng.choice(ERRORS))
            else:
                job.status = "completed"
                self._report(job)
            if job.on_done is not None:
                job.on_done(job)

    def _report(self, job: SimJob, error: str | None = None) -> None:
        report: dict[str, Any] = {"id": job.id, "attempt": job.attempt, "status": job.status}
        if error is not None:
            report["error"] = error
        self._reports.append(report)

    async def _reporter(self) -> None:
        """Send reports in batches, as a cluster daemon would: one request every 100 ms at most."""
        while True:
            await asyncio.sleep(0.1)
            if not self._reports:
                self._flushed.set()
                continue
            batch, self._reports = self._reports, []
            try:
                response = await self.http.post("/api/ingest/jobs", json={"jobs": batch})
                if response.status_code >= 400:
                    log.warning("cluster %d: reports refused: %s", self.cluster_id, response.text[:200])
            except httpx.HTTPError as exc:
                log.warning("cluster %d: reports failed (%s), retrying", self.cluster_id, type(exc).__name__)
                self._reports[:0] = batch

    async def _metrics(self) -> None:
        """CPU follows how many workers are busy; memory, disk and network wander plausibly."""
        memory, disk = self.rng.uniform(30, 60), self.rng.uniform(20, 70)
        while True:
            busy = sum(1 for j in self.jobs.values() if j.status == "running" and not j.removed)
            cpu = min(100.0, 8 + 90 * busy / max(1, self.workers) + self.rng.uniform(-4, 4))
            memory = min(95.0, max(10.0, memory + self.rng.uniform(-2, 2)))
            disk = min(99.0, disk + self.rng.uniform(0, 0.05))
            network = round(busy * self.rng.uniform(5, 40), 1)
            figures = {"cpu": round(max(0.0, cpu), 1), "memory": round(memory, 1), "disk": round(disk, 1), "network": network}
            try:
                await self.http.post("/api/ingest/metrics", json=figures)
            except httpx.HTTPError:
                pass
            await asyncio.sleep(1.0)

    async def flushed(self) -> None:
        """Wait until every report so far has been sent."""
        self._flushed.clear()
        await self._flushed.wait()

    # -- commands from the gateway

    async def _listen(self) -> None:
        if self.redis_cluster:
            await self.redis.initialize()  # the slot map, which the cluster's pubsub picks its node by
        pubsub = self.redis.pubsub()
        await pubsub.subscribe(keys.cluster_commands(self.cluster_id))
        self.listening.set()
        try:
            async for message in pubsub.listen():
                if message["type"] != "message":
                    continue
                try:
                    command = command_decoder.decode(message["data"])
                except msgspec.DecodeError:
                    log.warning("cluster %d: ignored a malformed command", self.cluster_id)
                    continue
                acted = self._act(command.action, command.jobs, command.priority)
                if self.confirm:
                    reply = Confirmation(command=command.id, cluster_id=self.cluster_id, jobs=acted)
                    await self.redis.rpush(command.reply_to, msgspec.json.encode(reply))
                    await self.redis.expire(command.reply_to, 60)
        finally:
            await pubsub.aclose()

    def _act(self, action: str, job_ids: list[int], priority: int | None = None) -> list[int]:
        """Carry out a command on the jobs this cluster holds; the ones acted on are confirmed."""
        if action == "sync":  # the ids are submissions: sync again the ones this cluster failed to sync
            acted = [i for i in job_ids if i in self.sync_failed]
            for submission_id in acted:
                self.sync_failed.pop(submission_id).set()
            return acted
        acted = []
        for job_id in job_ids:
            job = self.jobs.get(job_id)
            if job is None or job.removed:
                continue
            if self._act_on(action, job, priority):
                acted.append(job_id)
        return acted

    def _act_on(self, action: str, job: SimJob, priority: int | None) -> bool:
        active = ("queued", "retrying", "running", "holding")
        if action == "remove" and job.status in active:
            job.removed = True  # a running one stops; what it produced stays
        elif action == "hold" and job.status in ("queued", "retrying"):
            job.status = "holding"  # workers leave it alone
        elif action == "unhold" and job.status == "holding":
            job.status = "queued"
            self._enqueue(job)
        elif action == "kill" and job.status in active:
            job.status, job.run = "failed", job.run + 1
        elif action == "retry" or (action == "retry_failed" and job.status == "failed") or (
            action == "retry_preempted" and job.status == "preempted"
        ):
            if action == "retry" and job.status not in (*active, "completed", "failed", "preempted"):
                return False
            job.status, job.attempt, job.run = "retrying", job.attempt + 1, job.run + 1
            self._enqueue(job)
        elif action == "priority" and priority is not None and job.status in ("queued", "retrying", "holding"):
            job.priority = priority
            if job.status != "holding":
                self._enqueue(job)  # its newer entry counts; the old one is skipped
        elif action == "instance_type" and job.status in ("queued", "retrying", "holding"):
            pass  # its next run uses the new node type
        else:
            return False
        return True
