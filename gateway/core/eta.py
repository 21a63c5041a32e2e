"""Estimated time left for a trajectory, an analysis and a submission, without I/O and without a clock.

The estimate is built only from what the relay already folds: the job changes it reads from the outbox.

- **How long a job takes** on a cluster, per kind (gateway.core.durations): a running mean of the completed jobs'
  `finished_at - started_at` (a plain mean of the first ten, then an exponentially weighted one, so it follows a
  cluster that speeds up or slows down). Until `MIN_SAMPLES` jobs of a kind completed on a cluster, that kind's
  duration there is unknown, and so is every estimate that needs it: never a made-up figure.
- **How many workers** a cluster has: the clusters report CPU, memory, disk and network (gateway.core.team), not
  workers or queues, so the relay counts them from the jobs themselves: the most jobs seen running on the cluster
  at once while some of its jobs waited (a work-conserving cluster with a queue runs as many as it has workers),
  over its last `WORKER_SAMPLES` refreshes.
- **What is ahead** of a piece of work: each cluster's waiting work is kept in the order it arrived, as batches
  (one per trajectory, submission and analysis: an upload, an analysis of a pipeline run), in first-come order
  as clusters take them (the simulator's, and a batch scheduler's at one priority; priorities are not modelled).
  A batch finishes when the work ahead of it and its own are done, shared over the cluster's workers: the
  running jobs' time left (their mean less how long they have run), plus the waiting jobs' means, divided by
  the workers; and never sooner than its own longest job. A job ahead whose kind has no duration yet holds one
  worker for as long as it runs: the work behind it is shared over the other workers (a figure that assumes it
  outlasts them), and is unknown only while such jobs hold every worker.

An owner (a trajectory, an analysis, a submission) finishes when its last batch does, on whichever cluster. An
owner with a job holding (it waits for a person) or on a silent cluster has no estimate: nobody can say when.

**Work that is stuck** is named from the same durations: a job that has run `STUCK_MULTIPLE` (4) times as long
as its kind's mean on its cluster, and at least `STUCK_AFTER` seconds, is "running 4× longer than usual"
(`longer_than_usual`: the multiple, rounded). A refresh hands out each trajectory's such jobs when the list or a
multiple moved (`EtaChanges.overruns`); a job whose kind has no trusted mean there is never called stuck.

The relay calls `job_changed()` for every change (a few dictionary operations), and `refresh()` when `next_due()`
says: at most once a second after changes, and every few seconds while jobs run (their time left shrinks as they
run). `refresh()` returns only the figures that moved by more than their rounding (`rounded`): about 5 % of the
figure, so a trajectory with half an hour left is published again about once a minute, not at every change.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

import msgspec

from .aggregate import Change
from .durations import Durations
from .model import AnalysisEta, Job, Overrun
from .work_snapshot import WorkSnapshot

WORKER_SAMPLES = 16  # refreshes over which a cluster's most jobs running at once count as its workers
REFRESH_GAP = 1.0  # seconds: after changes, estimates are recomputed at most this often
REFRESH_EVERY = 5.0  # seconds: while jobs run, estimates are recomputed this often even with no change
OVERRUN = 0.1  # a job running past its kind's mean is assumed to have this share of the mean left
MAX_ANALYSES = 50  # analyses with an estimate in one trajectory's summary (the most recent ones)
STUCK_MULTIPLE = 4  # a job running this many times its kind's mean on its cluster is running longer than usual
STUCK_AFTER = 60.0  # seconds: and only once it has run this long (a 2 s job at 8 s is not stuck)
MAX_OVERRUNS = 50  # jobs running longer than usual named in one trajectory's summary (its count has them all)

WAITING = frozenset({"queued", "retrying"})
RUNNING = "running"
FINISHED = frozenset({"completed", "failed", "preempted"})
# Any other listed status of an unfinished job (holding, a silent cluster's jobs, a status added later) blocks
# the estimate of whatever it belongs to.

BatchKey = tuple[int, int | None, int | None]  # trajectory, submission, analysis


def step(seconds: float) -> int:
    """The rounding of a figure of this size: about 5 % of it, in round numbers."""
    if seconds < 60:
        return 5
    if seconds < 300:
        return 10
    if seconds < 900:
        return 30
    if seconds < 3600:
        return 60
    if seconds < 4 * 3600:
        return 300
    return 900


def rounded(seconds: float) -> int:
    """Seconds left as published: rounded to `step`, at least 1."""
    s = step(seconds)
    return max(1, round(seconds / s) * s)


def longer_than_usual(ran: float, usual: float | None) -> int | None:
    """How many times its usual duration a running job has run, rounded, once that is at least STUCK_MULTIPLE
    (and it ran at least STUCK_AFTER seconds); None while it is not running longer than usual, or nobody knows
    how long its kind usually takes."""
    if usual is None or not usual > 0.0 or not math.isfinite(ran) or ran < STUCK_AFTER:
        return None
    if ran < STUCK_MULTIPLE * usual:
        return None
    return round(ran / usual)


def settle(published: int | None, estimate: float | None) -> int | None:
    """The figure to publish: the one published until the estimate moved by more than its step (no flicker
    between two neighbours), else the estimate rounded."""
    if estimate is None:
        return None
    if published is not None and abs(estimate - published) < step(min(published, estimate)):
        return published
    return rounded(estimate)


class _Batch:
    """A cluster's unfinished jobs of one trajectory, submission and analysis."""

    __slots__ = ("waiting", "running", "blocked", "latest")

    def __init__(self) -> None:
        self.waiting: dict[str, int] = {}  # kind -> jobs queued or retrying
        self.running: dict[str, int] = {}  # kind -> jobs running
        self.blocked = 0  # holding, silent, or a status the estimate does not know
        self.latest = 0.0  # when its last running job started (the one with the most left)


class _Cluster:
    """A cluster's unfinished work: its batches in order, and its running jobs with their sums per kind (a
    refresh then costs a few operations per kind and per batch, not one per running job)."""

    __slots__ = ("batches", "running", "waiting", "run_n", "run_started", "workers")

    def __init__(self) -> None:
        self.batches: dict[BatchKey, _Batch] = {}  # in the order they arrived: first come, first served
        self.running: dict[int, tuple[BatchKey, str, float]] = {}  # job id -> batch, kind, started
        self.waiting = 0  # jobs queued or retrying
        self.run_n: dict[str, int] = {}  # kind -> jobs running
        self.run_started: dict[str, float] = {}  # kind -> the sum of their start times
        self.workers: deque[int] = deque(maxlen=WORKER_SAMPLES)

    def start(self, job_id: int, key: BatchKey, kind: str, started: float) -> None:
        batch = self.batches.get(key)
        if batch is None:
            batch = self.batches[key] = _Batch()
        batch.running[kind] = batch.running.get(kind, 0) + 1
        if started > batch.latest:
            batch.latest = started
        self.running[job_id] = (key, kind, started)
        self.run_n[kind] = self.run_n.get(kind, 0) + 1
        self.run_started[kind] = self.run_started.get(kind, 0.0) + started

    def stop(self, job_id: int) -> None:
        was = self.running.pop(job_id, None)
        if was is None:
            return  # not counted (the estimate started after it)
        key, kind, started = was
        n = self.run_n[kind] - 1
        if n:
            self.run_n[kind] = n
            self.run_started[kind] -= started
        else:
            del self.run_n[kind], self.run_started[kind]  # no rounding left behind
        batch = self.batches[key]
        n = batch.running[kind] - 1
        if n:
            batch.running[kind] = n
        else:
            del batch.running[kind]
            if not batch.running:
                batch.latest = 0.0
                if not (batch.waiting or batch.blocked):
                    del self.batches[key]

    def count(self, key: BatchKey, kind: str, status: str, n: int) -> None:
        """Count `n` (negative: take away) jobs of a batch in a status that is not running."""
        batch = self.batches.get(key)
        if batch is None:
            if n < 0:
                return  # not counted (the estimate started after it): nothing to take away
            batch = self.batches[key] = _Batch()
        if status in WAITING:
            waiting = batch.waiting
            have = waiting.get(kind, 0)
            if have + n > 0:
                waiting[kind] = have + n
                self.waiting += n
            else:
                self.waiting -= have
                waiting.pop(kind, None)
        elif batch.blocked + n > 0:
            batch.blocked += n
        else:
            batch.blocked = 0
        if not (batch.waiting or batch.running or batch.blocked):
            del self.batches[key]


class EtaChanges(msgspec.Struct, kw_only=True):
    """The figures a refresh moved: per trajectory and submission the seconds left (None: unknown, or nothing
    left to do), per trajectory its analyses' figures (None: none has work left)."""

    trajectories: dict[int, int | None] = msgspec.field(default_factory=dict)
    analyses: dict[int, list[AnalysisEta] | None] = msgspec.field(default_factory=dict)
    submissions: dict[int, int | None] = msgspec.field(default_factory=dict)
    # per trajectory: how many jobs run longer than usual, and the first MAX_OVERRUNS (0, None: none any more)
    overruns: dict[int, tuple[int, list[Overrun] | None]] = msgspec.field(default_factory=dict)


class EtaTracker:
    """The relay's estimates: fed every job change, refreshed when due, handing out the figures that moved."""

    def __init__(self) -> None:
        self.durations = Durations()
        self.clusters: dict[int, _Cluster] = {}
        self.trajectories: dict[int, int | None] = {}  # as last handed out
        self.submissions: dict[int, int | None] = {}
        self.analyses: dict[int, list[AnalysisEta]] = {}
        self.overruns: dict[int, list[tuple[int, int, int | None]]] = {}  # trajectory -> (job, times, submission)
        self._dirty = False
        self._last = -math.inf

    # -- input

    def load(self, snapshot: WorkSnapshot) -> None:
        for d in snapshot.durations:
            self.durations.seed(d.cluster, d.kind, d.samples, d.mean)
        for w in snapshot.waiting:
            self._cluster(w.cluster).count((w.trajectory, w.submission, w.analysis), w.kind, w.status, w.jobs)
        for r in snapshot.running:
            key = (r.trajectory, r.submission, r.analysis)
            self._cluster(r.cluster).start(r.id, key, r.kind, r.started or 0.0)
        self._dirty = True

    def job_changed(self, change: Change) -> None:
        """Fold one captured change in (a change a takeover's snapshot already saw is in `load()`'s work)."""
        old, new = change.old_status, change.new_status
        if old == new or change.counted:
            return
        job = change.job
        cluster = self.clusters.get(job.cluster_id)
        if cluster is None:
            if new is None or new in FINISHED:
                if new == "completed":
                    self._sample(job)
                return
            cluster = self.clusters[job.cluster_id] = _Cluster()
        self._dirty = True
        key = (job.trajectory_id, job.submission_id, job.analysis_id)
        if old == RUNNING:
            cluster.stop(job.id)
        elif old is not None and old not in FINISHED:
            cluster.count(key, job.kind, old, -1)
        if new == RUNNING:
            # A job without a start time (never, from the table's trigger) counts as started long ago.
            started = job.started_at or job.updated_at
            cluster.start(job.id, key, job.kind, started.timestamp() if started is not None else 0.0)
        elif new is None or new in FINISHED:
            if new == "completed":
                self._sample(job)
        else:
            cluster.count(key, job.kind, new, 1)

    def _sample(self, job: Job) -> None:
        if job.started_at is not None and job.finished_at is not None:
            self.durations.observe(job.cluster_id, job.kind, (job.finished_at - job.started_at).total_seconds())

    def _cluster(self, cluster_id: int) -> _Cluster:
        cluster = self.clusters.get(cluster_id)
        if cluster is None:
            cluster = self.clusters[cluster_id] = _Cluster()
        return cluster

    # -- output

    def next_due(self) -> float | None:
        """When estimates should be recomputed (the adapter's monotonic clock), or None while nothing moves
        them."""
        if self._dirty:
            return self._last + REFRESH_GAP
        if any(c.running for c in self.clusters.values()):
            return self._last + REFRESH_EVERY
        return None

    def refresh(self, now: float, wall: float) -> EtaChanges | None:
        """Recompute if due (`now`: monotonic seconds; `wall`: seconds since the Unix epoch, the clock the jobs'
        `started_at` are on); the figures that moved, or None."""
        due = self.next_due()
        if due is None or now < due:
            return None
        self._dirty = False
        self._last = now
        trajectories: dict[int, float] = {}
        submissions: dict[int, float] = {}
        analyses: dict[tuple[int, int], float] = {}
        for cluster_id, cluster in self.clusters.items():
            if not cluster.batches:
                continue  # kept: its workers are remembered for its next work
            for (trajectory, submission, analysis), finish in self._finishes(cluster_id, cluster, wall):
                if finish > trajectories.get(trajectory, -1.0):
                    trajectories[trajectory] = finish
                if submission is not None and finish > submissions.get(submission, -1.0):
                    submissions[submission] = finish
                if analysis is not None and finish > analyses.get((trajectory, analysis), -1.0):
                    analyses[(trajectory, analysis)] = finish
        changes = EtaChanges()
        _moved(self.trajectories, trajectories, changes.trajectories)
        _moved(self.submissions, submissions, changes.submissions)
        self._moved_analyses(analyses, changes.analyses)
        self._moved_overruns(wall, changes.overruns)
        if not (changes.trajectories or changes.submissions or changes.analyses or changes.overruns):
            return None
        return changes

    def _finishes(self, cluster_id: int, cluster: _Cluster, wall: float) -> Iterable[tuple[BatchKey, float]]:
        """When each of the cluster's batches finishes, in seconds from now (math.inf: unknown)."""
        known = self.durations.mean
        means: dict[str, float | None] = {}

        def mean(kind: str) -> float | None:
            if kind not in means:
                means[kind] = known(cluster_id, kind)
            return means[kind]

        running = len(cluster.running)
        if cluster.waiting:
            cluster.workers.append(running)
        workers = max(max(cluster.workers, default=0), running, 1)
        ahead = 0.0  # work (seconds of one worker) before the next waiting job can start
        # Jobs ahead of a kind nobody can time yet: each holds one worker for as long as it runs, so the work that
        # can be timed is shared over the others (at most that long: the figure assumes they outlast it). Only with
        # every worker held is the work behind them unknown.
        held = 0
        for kind, n in cluster.run_n.items():  # what the running jobs have left: their mean less how long they ran
            d = mean(kind)
            if d is None:
                held += n
                continue
            left = n * (d - wall) + cluster.run_started[kind]
            ahead += max(left, n * d * OVERRUN)
        for key, batch in cluster.batches.items():
            finish = 0.0
            if batch.running:  # never sooner than its last started job's time left
                longest, told = 0.0, True
                for kind in batch.running:
                    d = mean(kind)
                    if d is None:
                        told = False
                        break
                    longest = max(longest, d)
                finish = max(longest - (wall - batch.latest), longest * OVERRUN) if told else math.inf
            if batch.waiting:
                untimed = held  # its own jobs of an unknown kind: it cannot be timed itself
                for kind, n in batch.waiting.items():
                    d = mean(kind)
                    if d is None:
                        held += n
                        continue
                    ahead += n * d
                    if d > finish:
                        finish = d
                free = workers - untimed
                finish = math.inf if held > untimed or free <= 0 else max(finish, ahead / free)
            if batch.blocked:
                finish = math.inf
            yield key, finish

    def _moved_overruns(self, wall: float, out: dict[int, tuple[int, list[Overrun] | None]]) -> None:
        """The running jobs past `longer_than_usual`, per trajectory, handed out where the list moved."""
        found: dict[int, list[tuple[int, int, int | None]]] = {}
        mean = self.durations.mean
        for cluster_id, cluster in self.clusters.items():
            # Per kind, how long a job must have run to be asked (`longer_than_usual` holds it for no shorter run):
            # a refresh looks at every running job, thousands in a busy partition, most far from overrunning.
            usual: dict[str, float | None] = {}
            least: dict[str, float] = {}
            for kind in cluster.run_n:
                d = usual[kind] = mean(cluster_id, kind)
                least[kind] = max(STUCK_AFTER, STUCK_MULTIPLE * d) if d is not None and d > 0.0 else math.inf
            for job_id, ((trajectory, submission, _), kind, started) in cluster.running.items():
                if started <= 0.0:
                    continue  # no start time known: nobody can say how long it ran
                ran = wall - started
                if not ran >= least[kind]:
                    continue
                times = longer_than_usual(ran, usual[kind])
                if times is not None:
                    found.setdefault(trajectory, []).append((job_id, times, submission))
        for trajectory in self.overruns.keys() - found.keys():
            del self.overruns[trajectory]
            out[trajectory] = (0, None)
        for trajectory, jobs in found.items():
            jobs.sort()
            if jobs != self.overruns.get(trajectory):
                self.overruns[trajectory] = jobs
                out[trajectory] = (len(jobs), [Overrun(id=j, times=t) for j, t, _ in jobs[:MAX_OVERRUNS]])

    def _moved_analyses(
        self, estimates: dict[tuple[int, int], float], out: dict[int, list[AnalysisEta] | None]
    ) -> None:
        by_trajectory: dict[int, list[tuple[int, float]]] = {}
        for (trajectory, analysis), finish in estimates.items():
            by_trajectory.setdefault(trajectory, []).append((analysis, finish))
        for trajectory in self.analyses.keys() - by_trajectory.keys():
            del self.analyses[trajectory]
            out[trajectory] = None
        for trajectory, figures in by_trajectory.items():
            figures.sort(reverse=True)  # the most recent analyses first
            published = {a.id: a.eta for a in self.analyses.get(trajectory, ())}
            now = [
                AnalysisEta(id=analysis, eta=settle(published.get(analysis), _known(finish)))
                for analysis, finish in figures[:MAX_ANALYSES]
            ]
            if now != self.analyses.get(trajectory):
                self.analyses[trajectory] = now
                out[trajectory] = now


def _known(finish: float) -> float | None:
    return None if finish == math.inf else finish


def _moved(published: dict[int, int | None], estimates: dict[int, float], out: dict[int, int | None]) -> None:
    """Hand out (into `out`, and remember) the figures that moved; owners with nothing left go back to None."""
    for owner in published.keys() - estimates.keys():
        if published.pop(owner) is not None:
            out[owner] = None
    for owner, finish in estimates.items():
        before = published.get(owner)
        figure = published[owner] = settle(before, _known(finish))
        if figure != before:
            out[owner] = figure
