"""One simulated cluster: workers that run its queued jobs, reports over the ingest API, commands over Redis.

Its workers pick the cluster's own queued jobs, run them for realistic durations, fail some (a frame job gets
three attempts: it waits again as `retrying`, then fails for good), and honour Remove and Retry commands,
confirming what they did (unless told never to confirm, as a broken cluster would not). Its operator retries a
failed sync after a while when nobody clicks Retry Sync, so an unattended demo never stalls on one.

Every delay is in simulated seconds, divided by `speed`; only the pace of requests to the gateway is real time
(the gateway limits each cluster's requests a second, and compressing time must not multiply them).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import random
from collections import deque
from collections.abc import Callable, Coroutine
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
REPORT_EVERY = 0.1  # real seconds: a cluster daemon's batching cadence, at most 10 requests a second
METRICS_EVERY = 1.0  # simulated seconds, but never more often than REPORT_EVERY
FINISHED_KEPT = 20_000  # finished jobs a cluster still knows (to retry them); older ones are forgotten
STOP_REQUESTS_WITHIN = 5.0  # real seconds stop() lets requests already sent finish


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
    sync_fail_rate: float = 0.1  # of staged uploads whose sync to fast storage fails
    operator_delay: tuple[float, float] = (20.0, 60.0)  # simulated seconds before the operator retries a failed sync
    jobs: dict[int, SimJob] = field(default_factory=dict)
    instance_types: list[dict[str, Any]] = field(default_factory=lambda: list(INSTANCE_TYPES))

    def __post_init__(self) -> None:
        self.cluster_id = int(self.key.split(".")[0][1:])
        self.rng = random.Random(self.seed)
        self.queue: list[tuple[int, int, int]] = []  # (-priority, order, job id): higher priority first
        self._order = itertools.count()
        self._work = asyncio.Event()
        self._reports: list[dict[str, Any]] = []
        self._reported = 0  # reports made so far...
        self._sent = 0  # ...and handed to the gateway (in order: a failed batch goes back to the front)
        self._progress = asyncio.Event()
        self._busy = 0  # workers running a job
        self._finished: deque[int] = deque()  # finished job ids, oldest first
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()  # work started by callbacks (downloads, artifact uploads)
        self._requests: set[asyncio.Future[httpx.Response]] = set()
        self.http = httpx.AsyncClient(
            base_url=self.gateway_url, headers={"Authorization": f"Bearer {self.key}"}, timeout=30
        )
        self.redis = connect(self.redis_url, self.redis_cluster)
        self.listening = asyncio.Event()
        self.sync_failed: dict[int, asyncio.Event] = {}  # submissions whose sync failed, waiting for a retry
        self.sync_failures = 0  # how many syncs failed so far

    # -- lifecycle

    async def start(self) -> None:
        if self.instance_types:
            response = await self._post("/api/ingest/instance-types", {"instance_types": self.instance_types})
            response.raise_for_status()
        self._tasks = [asyncio.create_task(self._listen(), name=f"cluster-{self.cluster_id}-commands")]
        self._tasks += [
            asyncio.create_task(self._worker(), name=f"cluster-{self.cluster_id}-worker") for _ in range(self.workers)
        ]
        self._tasks.append(asyncio.create_task(self._reporter(), name=f"cluster-{self.cluster_id}-reports"))
        if self.report_metrics:
            self._tasks.append(asyncio.create_task(self._metrics(), name=f"cluster-{self.cluster_id}-metrics"))
        await asyncio.wait_for(self.listening.wait(), 10)

    async def stop(self) -> None:
        """Stop working, let the requests already sent finish, then close the connections."""
        tasks = [*self._tasks, *self._background]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._requests:
            _, late = await asyncio.wait(self._requests, timeout=STOP_REQUESTS_WITHIN)
            for request in late:
                request.cancel()
            await asyncio.gather(*self._requests, return_exceptions=True)
        await self.http.aclose()
        await self.redis.aclose()

    def spawn(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Start work that a callback cannot await; stop() ends it, and a failed request is one warning line."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)

        def done(task: asyncio.Task[None]) -> None:
            self._background.discard(task)
            failure = None if task.cancelled() else task.exception()
            if isinstance(failure, httpx.HTTPError):
                log.warning("cluster %d: %s failed: %s", self.cluster_id, what, describe_failure(failure))
            elif failure is not None:
                log.error("cluster %d: %s failed", self.cluster_id, what, exc_info=failure)

        task.add_done_callback(done)

    async def _post(self, path: str, body: Any) -> httpx.Response:
        """POST to the gateway. A request once sent finishes even if its caller is cancelled (stop() waits for
        it): cut off half-way, the gateway would only see a client vanish mid-request."""
        request = asyncio.ensure_future(self.http.post(path, json=body))
        self._requests.add(request)
        request.add_done_callback(self._requests.discard)
        return await asyncio.shield(request)

    # -- the platform's side: registering work

    async def create_trajectory(self, name: str) -> int:
        response = await self._post("/api/ingest/trajectories", {"name": name})
        response.raise_for_status()
        return int(response.json()["id"])

    async def create_analysis(self, trajectory_id: int, plugin: str) -> int:
        response = await self._post("/api/ingest/analyses", {"trajectory_id": trajectory_id, "plugin": plugin})
        response.raise_for_status()
        return int(response.json()["id"])

    async def create_submission(self, **fields: Any) -> int:
        response = await self._post("/api/ingest/submissions", fields)
        response.raise_for_status()
        return int(response.json()["id"])

    async def update_submission(self, submission_id: int, **fields: Any) -> None:
        response = await self._post(f"/api/ingest/submissions/{submission_id}", fields)
        response.raise_for_status()

    async def submit(
        self, reports: list[dict[str, Any]], on_done: Callable[[SimJob], None] | None = None, preemptible: bool = False
    ) -> list[int]:
        """Create jobs (queued) on this cluster, in chunks as an upload arrives; returns their ids."""
        ids: list[int] = []
        for start in range(0, len(reports), 1000):
            chunk = [{"status": "queued", **r} for r in reports[start : start + 1000]]
            response = await self._post("/api/ingest/jobs", {"jobs": chunk})
            response.raise_for_status()
            for report, result in zip(chunk, response.json()["jobs"]):
                job = self.jobs[result["id"]] = SimJob(
                    result["id"], report["kind"], on_done=on_done, preemptible=preemptible
                )
                self._enqueue(job)
                ids.append(job.id)
            self._work.set()
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

    def adopt(self, job_id: int, kind: str, attempt: int, status: str, priority: int = 0) -> None:
        """Take up a job this cluster had before it restarted: held, it stays held; else it waits to run again."""
        job = self.jobs[job_id] = SimJob(job_id, kind, attempt=attempt, priority=priority)
        if status == "holding":
            job.status = "holding"
        else:
            self._enqueue(job)

    # -- running work

    def _enqueue(self, job: SimJob) -> None:
        heapq.heappush(self.queue, (-job.priority, next(self._order), job.id))
        self._work.set()

    def backlog(self) -> int:
        """About how many jobs wait for a worker (entries of re-prioritised or removed jobs count until picked)."""
        return len(self.queue)

    def queued_order(self) -> list[int]:
        """The jobs waiting, in the order workers will pick them (holding ones are left alone)."""
        waiting = (self.jobs.get(i) for _, _, i in sorted(self.queue))
        return [j.id for j in waiting if j is not None and j.status in ("queued", "retrying") and not j.removed]

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
            self._busy += 1
            try:
                await asyncio.sleep(self._duration(job.kind))
            finally:
                self._busy -= 1
            if job.removed or job.run != run:
                continue  # stopped while it ran (removed, killed or restarted)
            if job.preemptible and self.rng.random() < self.preempt_rate:
                job.status = "preempted"  # its node was taken away: not retried by itself (Retry Preempted does)
                self._report(job)
                self._finish(job)
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
            self._finish(job)
            if job.on_done is not None:
                job.on_done(job)

    def _finish(self, job: SimJob) -> None:
        """Remember a finished job for a while (it may be retried), then forget it: memory stays bounded all day."""
        self._finished.append(job.id)
        while len(self._finished) > FINISHED_KEPT:
            old = self.jobs.get(self._finished.popleft())
            if old is not None and (old.removed or old.status in ("completed", "failed", "preempted")):
                del self.jobs[old.id]

    def _report(self, job: SimJob, error: str | None = None) -> None:
        report: dict[str, Any] = {"id": job.id, "attempt": job.attempt, "status": job.status}
        if error is not None:
            report["error"] = error
        self._reports.append(report)
        self._reported += 1

    async def _reporter(self) -> None:
        """Send reports in batches, as a cluster daemon would: one request every REPORT_EVERY at most. A batch the
        gateway could not take now (no answer, 429, 5xx) goes again after a pause; one it refused is dropped."""
        failing = False
        while True:
            await asyncio.sleep(REPORT_EVERY)
            if not self._reports:
                continue
            batch, self._reports = self._reports, []
            try:
                response = await self._post("/api/ingest/jobs", {"jobs": batch})
                problem = None if response.status_code < 400 else f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                response, problem = None, describe_failure(exc)
            if problem is not None and (response is None or response.status_code == 429 or response.status_code >= 500):
                if not failing:
                    log.warning("cluster %d: reports not delivered (%s); retrying", self.cluster_id, problem)
                failing = True
                self._reports[:0] = batch
                await asyncio.sleep(_retry_after(response))
                continue
            if failing:
                log.warning("cluster %d: reports delivered again", self.cluster_id)
                failing = False
            if problem is not None and response is not None:
                log.warning("cluster %d: reports refused (%s): %s", self.cluster_id, problem, response.text[:200])
            self._sent += len(batch)
            self._progress.set()

    async def _metrics(self) -> None:
        """CPU follows how many workers are busy; memory, disk and network wander plausibly."""
        memory, disk = self.rng.uniform(30, 60), self.rng.uniform(20, 70)
        while True:
            busy = self._busy
            cpu = min(100.0, 8 + 90 * busy / max(1, self.workers) + self.rng.uniform(-4, 4))
            memory = min(95.0, max(10.0, memory + self.rng.uniform(-2, 2)))
            disk = min(99.0, disk + self.rng.uniform(0, 0.05))
            network = round(busy * self.rng.uniform(5, 40), 1)
            figures = {
                "cpu": round(max(0.0, cpu), 1),
                "memory": round(memory, 1),
                "disk": round(disk, 1),
                "network": network,
            }
            try:
                await self._post("/api/ingest/metrics", figures)
            except httpx.HTTPError:
                pass  # the next figures replace these anyway
            await asyncio.sleep(max(METRICS_EVERY / self.speed, REPORT_EVERY))

    async def flushed(self) -> None:
        """Wait until every report so far has been handed to the gateway."""
        target = self._reported
        while self._sent < target:
            self._progress.clear()
            await self._progress.wait()

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
            self._finish(job)
        elif action == "hold" and job.status in ("queued", "retrying"):
            job.status = "holding"  # workers leave it alone
        elif action == "unhold" and job.status == "holding":
            job.status = "queued"
            self._enqueue(job)
        elif action == "kill" and job.status in active:
            job.status, job.run = "failed", job.run + 1
            self._finish(job)
        elif (
            action == "retry"
            or (action == "retry_failed" and job.status == "failed")
            or (action == "retry_preempted" and job.status == "preempted")
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


def describe_failure(exc: httpx.HTTPError) -> str:
    """One line for a failed request: its kind, and the status when the gateway answered."""
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code} from {exc.request.url.path}"
    return type(exc).__name__


def _retry_after(response: httpx.Response | None) -> float:
    """How long to wait before sending again: what a 429 says (Retry-After), else a second."""
    try:
        return min(30.0, float(response.headers.get("retry-after", 1))) if response is not None else 1.0
    except ValueError:
        return 1.0
