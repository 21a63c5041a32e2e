"""What a simulated cluster keeps of the finished jobs it no longer holds: two bytes a job (its kind, attempt, how
it ended and whether its node was preemptible), so a retry of a failure from hours ago runs it again as its next
attempt while memory stays small all day (about 2 MB per million job ids, every cluster's ids included)."""

from __future__ import annotations

from array import array

from .jobs import SimJob

ENDS = ("completed", "failed", "preempted")  # codes 1..3; 0 marks an id never kept
MAX_ATTEMPT = 127  # a job retried more often than this is not kept (its attempt would not fit)
MAX_KINDS = 64


class Archive:
    def __init__(self) -> None:
        self._base: int | None = None  # the lowest id it may hold: the array starts there
        self._entries = array("H")
        self._kinds: list[str] = []

    def keep(self, job: SimJob) -> None:
        """Remember a finished job compactly (a removed one, or one whose kind or attempt does not fit, is not)."""
        if job.removed or job.status not in ENDS or job.attempt > MAX_ATTEMPT:
            return
        if job.kind not in self._kinds:
            if len(self._kinds) == MAX_KINDS:
                return
            self._kinds.append(job.kind)
        if self._base is None:
            self._base = job.id
        if job.id < self._base:  # jobs finish out of order: room below, with slack so this stays rare
            room = self._base - job.id + 1024
            self._entries[0:0] = array("H", bytes(2 * room))
            self._base -= room
        index = job.id - self._base
        if index >= len(self._entries):
            self._entries.extend(array("H", bytes(2 * (index + 1 - len(self._entries)))))
        self._entries[index] = (
            job.attempt
            | (ENDS.index(job.status) + 1) << 7
            | int(job.preemptible) << 9
            | self._kinds.index(job.kind) << 10
        )

    def take(self, job_id: int) -> SimJob | None:
        """The job as it finished, rebuilt (and no longer kept here: the cluster holds it again), or None."""
        if self._base is None or not 0 <= job_id - self._base < len(self._entries):
            return None
        entry = self._entries[job_id - self._base]
        if entry == 0:
            return None
        self._entries[job_id - self._base] = 0
        return SimJob(
            job_id,
            self._kinds[entry >> 10],
            attempt=entry & 0x7F,
            status=ENDS[(entry >> 7 & 0b11) - 1],
            preemptible=bool(entry >> 9 & 1),
        )
