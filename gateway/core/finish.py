"""When a trajectory's work finishes, and what the notice says.

A trajectory's work finishes when its active jobs (queued, retrying, running) have stayed at none for a
settle time, so that an upload inserted in chunks, or analyses followed by their artifact uploads, do not
finish early. The core never reads a clock: the adapter passes `now` in and wakes up at `next_due()`.

What a finish tells, and to whom:

- A wave in which a person stopped work (removed an active job: Remove Running Jobs, Delete analysis; or killed
  one: Kill on the Submissions page) ends silently: no notice, no glow, even when other jobs of it completed
  first. Its notice would report as finished (or failed) work that a person cut short, and that person knows.
  An active job swept out by retention counts the same: it did not finish either. Work that starts after the
  silent finish is a new wave and notifies as usual.
- The glow is for a trajectory whose every listed job completed when its wave finished (its counts then, not
  only this wave's jobs): never while a failed or preempted job of it is still listed.
- The notice names the members whose submissions the wave's jobs belong to (`users`), so that a browser can
  tell its person "your jobs finished" whichever page they look at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from .control import KILLED
from .model import Counts
from .status import ACTIVE, FAILED

SETTLE = 0.5  # seconds with no active job before a wave counts as finished
# The submissions a wave remembers, to name whose work it was: a wave is usually one upload or one pipeline run;
# past this many the others are not named (a finish must not grow with the farm).
MAX_WAVE_SUBMISSIONS = 32

SUCCESS = "success"
WARNING = "warning"


def notice_title(has_analysis: bool, has_rasterize: bool, failed: bool) -> tuple[str, str]:
    """The notice's title and level, from what the finished wave held."""
    if has_analysis:
        return ("Analysis completed with errors", WARNING) if failed else ("Analysis completed successfully!", SUCCESS)
    if has_rasterize:
        return (
            ("Rasterization completed with errors", WARNING)
            if failed
            else ("Rasterization completed successfully", SUCCESS)
        )
    return ("Jobs completed with errors", WARNING) if failed else ("Jobs completed successfully", SUCCESS)


def cuts_short(old_status: str | None, new_status: str | None, error: str | None) -> bool:
    """Whether a change ended a job's work without the job finishing it: removed (or swept) while active, or
    killed by a person."""
    if new_status is None:
        return old_status in ACTIVE
    return new_status == "failed" and error == KILLED


def every_job_completed(counts: Counts) -> bool:
    """The glow's rule: the trajectory lists jobs and every one of them completed."""
    total = counts.total()
    return total > 0 and counts.completed == total


@dataclass
class Wave:
    """What one trajectory has done since its work last finished."""

    number: int  # waves of this trajectory so far; a finish is once per (trajectory, number)
    has_analysis: bool = False
    has_rasterize: bool = False
    failed: bool = False
    stopped: bool = False  # a person removed or killed some of its active jobs: it ends silently
    submissions: set[int] = field(default_factory=set)  # whose work it was (at most MAX_WAVE_SUBMISSIONS)

    def learn(self, analysis: bool, rasterize: bool, failed: bool, submissions: set[int]) -> None:
        """What its jobs did before this relay read them (a wave opened at takeover): its notice says it too."""
        self.has_analysis |= analysis
        self.has_rasterize |= rasterize
        self.failed |= failed
        room = MAX_WAVE_SUBMISSIONS - len(self.submissions)
        self.submissions.update(sorted(submissions - self.submissions)[: max(room, 0)])


@dataclass
class Finish:
    trajectory_id: int
    team_id: int
    wave: int
    title: str
    level: str
    glow: bool  # every listed job of the trajectory completed (the adapter checks its counts: every_job_completed)
    silent: bool = False  # a person cut the wave short: nothing is published, the wave is only closed
    submissions: set[int] = field(default_factory=set)
    name: str = ""  # the trajectory's (the adapter fills it in, with `users`)
    users: list[int] = field(default_factory=list)  # the members whose submissions the wave's jobs belong to


@dataclass
class FinishTracker:
    """Open waves per trajectory; turns `active == 0` for `settle` seconds into one Finish."""

    settle: float = SETTLE
    waves: dict[int, Wave] = field(default_factory=dict)
    last_wave: dict[int, int] = field(default_factory=dict)  # closed waves, so numbers keep rising
    # The open waves with no active job, and since when: a cycle looks at these alone (while work runs, the
    # trajectories that are busy are most of them).
    idle: dict[int, float] = field(default_factory=dict)
    # (trajectory, wave, time of the change that opened it) for waves opened this cycle
    started: list[tuple[int, int, datetime | None]] = field(default_factory=list)
    # The trajectories whose open wave was restored at takeover, what it holds read from their jobs: the rows the
    # takeover reads again for them (counted already) are in it. Any other trajectory's such rows are work no
    # relay saw (written between one relay's end and its successor's snapshot), and open or feed a wave as usual.
    restored: set[int] = field(default_factory=set)

    def restore(
        self, trajectory_id: int, last_wave: int, open_wave: Wave | None, idle_since: float | None = None
    ) -> None:
        """At takeover: the last wave number, and the wave still open (not finished) if any, with since when
        its trajectory has had no active job (None: it has some)."""
        self.last_wave[trajectory_id] = last_wave
        if open_wave is not None:
            self.waves[trajectory_id] = open_wave
            self.restored.add(trajectory_id)
            if idle_since is not None:
                self.idle[trajectory_id] = idle_since

    def open_unrecorded(self, trajectory_id: int) -> None:
        """At takeover, after `restore`: a trajectory at work with no open wave recorded. Its work began while no
        relay read its changes (between one relay's end and its successor's snapshot, say), so no wave started:
        it starts now, recorded as any other, and finishes when the work does."""
        if trajectory_id in self.waves:
            return
        number = self.last_wave.get(trajectory_id, 0) + 1
        self.waves[trajectory_id] = Wave(number)
        self.started.append((trajectory_id, number, None))

    def job_changed(
        self,
        trajectory_id: int,
        kind: str,
        status: str | None,
        active_after: int,
        now: float,
        at: datetime | None = None,
        submission_id: int | None = None,
        cut_short: bool = False,
    ) -> None:
        """A job of the trajectory changed; `active_after` is the trajectory's active count after it;
        `cut_short`: the change stopped the job's work (`cuts_short`)."""
        wave = self.waves.get(trajectory_id)
        if wave is None:
            if status is None or status not in ACTIVE:
                return  # an idle trajectory's job removed or settled: not work starting
            number = self.last_wave.get(trajectory_id, 0) + 1
            wave = self.waves[trajectory_id] = Wave(number)
            self.started.append((trajectory_id, number, at))
        if kind == "analysis":
            wave.has_analysis = True
        elif kind == "rasterize":
            wave.has_rasterize = True
        if cut_short:
            wave.stopped = True
        elif status in FAILED:
            wave.failed = True  # a preempted task ends the wave with errors too
        if submission_id is not None and len(wave.submissions) < MAX_WAVE_SUBMISSIONS:
            wave.submissions.add(submission_id)
        if active_after == 0:
            self.idle[trajectory_id] = now
        else:
            self.idle.pop(trajectory_id, None)

    def next_due(self) -> float | None:
        return min(self.idle.values()) + self.settle if self.idle else None

    def take_finished(self, now: float, team_of: dict[int, int]) -> list[Finish]:
        out = []
        settled = [t for t, since in self.idle.items() if now >= since + self.settle]
        for trajectory_id in settled:
            del self.idle[trajectory_id]
            wave = self.waves.pop(trajectory_id)
            self.last_wave[trajectory_id] = wave.number
            title, level = notice_title(wave.has_analysis, wave.has_rasterize, wave.failed)
            glow = not wave.failed and not wave.stopped
            team_id = team_of.get(trajectory_id, 0)
            out.append(Finish(trajectory_id, team_id, wave.number, title, level, glow, wave.stopped, wave.submissions))
        return out

    def take_started(self) -> list[tuple[int, int, datetime | None]]:
        started, self.started = self.started, []
        return started
