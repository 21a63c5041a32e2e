"""A simulated cluster's jobs: the queue its workers take them from, highest priority first, and the finished
ones it holds whole for a while before handing them to `forget` (gateway.sim.archive keeps them in two bytes, so
they may still be retried): memory stays small all day."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

FINISHED_KEPT = 20_000  # finished jobs a cluster holds whole; older ones go to `forget`


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
    started_at: float | None = None  # when a worker started its current run (wall clock), told with its end
    on_done: Callable[[SimJob], None] | None = None


class JobQueue:
    def __init__(
        self, jobs: dict[int, SimJob], kept: int = FINISHED_KEPT, forget: Callable[[SimJob], None] | None = None
    ) -> None:
        self.jobs = jobs  # every job the cluster knows, by id
        self.entries: list[tuple[int, int, int]] = []  # (-priority, order, job id): higher priority first
        self._order = itertools.count()
        self._work = asyncio.Event()
        self._finished: deque[int] = deque()  # finished job ids, oldest first
        self._kept = kept
        self._forget = forget

    def push(self, job: SimJob) -> None:
        """The job waits for a worker (again, or at a new priority: its older entry is then skipped)."""
        heapq.heappush(self.entries, (-job.priority, next(self._order), job.id))
        self._work.set()

    def __len__(self) -> int:
        """Entries waiting, including those of re-prioritised or removed jobs until a worker skips them."""
        return len(self.entries)

    def waiting(self) -> list[int]:
        """The jobs waiting, in the order workers will pick them (holding ones are left alone)."""
        waiting = (self.jobs.get(i) for _, _, i in sorted(self.entries))
        return [j.id for j in waiting if j is not None and j.status in ("queued", "retrying") and not j.removed]

    async def next(self) -> SimJob:
        """The next job to run, once there is one."""
        while True:
            if not self.entries:
                self._work.clear()
                await self._work.wait()
                continue
            priority, _, job_id = heapq.heappop(self.entries)
            job = self.jobs.get(job_id)
            if job is None or job.removed or job.status not in ("queued", "retrying"):
                continue
            if -priority != job.priority:  # re-prioritised while waiting: its newer entry counts
                continue
            return job

    def finish(self, job: SimJob) -> None:
        """Hold a finished job whole for a while (it may be retried), then hand it to `forget`."""
        self._finished.append(job.id)
        while len(self._finished) > self._kept:
            old = self.jobs.get(self._finished.popleft())
            if old is not None and (old.removed or old.status in ("completed", "failed", "preempted")):
                del self.jobs[old.id]
                if self._forget is not None:
                    self._forget(old)
