"""Each job channel's pace, without I/O: a change that finds its channel quiet goes out with the next cycle; a
channel that published less than its window ago holds its changes (latest version per job) until the window
ends, the window growing with the channel's own batches. So one busy trajectory gathers while every other
channel keeps its own pace.
"""

from __future__ import annotations

from .model import Job

MAX_TICK = 0.05  # a channel's window grows up to this with the size of its batches
# After a channel published, it gathers at least this long: a channel gets at most 50 frames a second however
# fast its jobs change (every frame is written to every subscriber; 20 ms is below what a person can see).
MIN_TICK = 0.02


def batch_delay(jobs_last_batch: int) -> float:
    """How long a channel gathers after a batch: MIN_TICK, up to MAX_TICK as its batches grow."""
    return min(MAX_TICK, max(MIN_TICK, jobs_last_batch * 0.0005)) if jobs_last_batch else 0.0


class JobWindows:
    """Each job channel's pace: a change that finds its channel quiet goes out with the next cycle; a channel
    that published less than its window ago holds its changes (latest version per job) until the window ends.
    So one busy trajectory gathers while every other channel keeps its own pace."""

    def __init__(self) -> None:
        self.pending: dict[str, dict[int, Job]] = {}  # channel -> job id -> its latest version
        self._opens: dict[str, float] = {}  # channel -> when its window ends (a channel with none is quiet)

    def add(self, channel: str, job: Job) -> None:
        held = self.pending.get(channel)
        if held is None:
            self.pending[channel] = {job.id: job}
            return
        seen = held.get(job.id)
        if seen is None or job.version > seen.version:
            held[job.id] = job

    def take_due(self, now: float) -> dict[str, list[Job]]:
        """The channels whose window has ended, with their jobs; each one's next window starts now."""
        due: dict[str, list[Job]] = {}
        opens = self._opens
        for channel, held in self.pending.items():
            if now >= opens.get(channel, float("-inf")):
                due[channel] = list(held.values())
        for channel, jobs in due.items():
            del self.pending[channel]
            opens[channel] = now + batch_delay(len(jobs))
        if len(opens) > 2 * len(self.pending) + 1024:  # forget windows long over: channels come and go
            self._opens = {c: t for c, t in opens.items() if t > now or c in self.pending}
        return due

    def next_due(self) -> float | None:
        """When the earliest held channel's window ends."""
        opens = self._opens
        return min((opens.get(c, float("-inf")) for c in self.pending), default=None)
