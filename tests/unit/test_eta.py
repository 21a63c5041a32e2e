"""Estimated time left: durations per cluster and kind, workers counted from the jobs, the queue ahead in the order
work arrived, unknown until enough jobs finished (never a made-up figure), and published only when it moved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from gateway.core.aggregate import Change, SubmissionChange
from gateway.core.batching import Batcher
from gateway.core.durations import MIN_SAMPLES, Durations
from gateway.core.eta import (
    OVERRUN,
    REFRESH_EVERY,
    REFRESH_GAP,
    STUCK_MULTIPLE,
    EtaTracker,
    longer_than_usual,
    rounded,
    settle,
    step,
)
from gateway.core.model import AnalysisEta, Counts, Job, Overrun, TrajectorySummary
from gateway.core.protocol import decode_server
from gateway.core.submission import SubmissionRecord, SubmissionRow
from gateway.core.work_snapshot import RecentDurations, RunningJob, WaitingWork, WorkSnapshot

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WALL0 = T0.timestamp()


class World:
    """Jobs on clusters, changed as the outbox would capture them, fed to a tracker."""

    def __init__(self, tracker: EtaTracker | None = None) -> None:
        self.tracker = tracker or EtaTracker()
        self.jobs: dict[int, Job] = {}
        self.next_id = 1
        self.now = 0.0  # the relay's monotonic clock

    def submit(
        self,
        n: int,
        trajectory: int = 10,
        cluster: int = 1,
        kind: str = "preprocess",
        submission: int | None = None,
        analysis: int | None = None,
    ) -> list[int]:
        ids = []
        for _ in range(n):
            job = Job(
                id=self.next_id,
                team_id=1,
                trajectory_id=trajectory,
                cluster_id=cluster,
                kind=kind,
                name=kind,
                status="queued",
                version=1,
                submission_id=submission,
                analysis_id=analysis,
            )
            self.jobs[job.id] = job
            self.tracker.job_changed(Change(old_status=None, new_status="queued", job=job))
            ids.append(job.id)
            self.next_id += 1
        return ids

    def move(self, job_id: int, status: str, at: float = 0.0, counted: bool = False) -> None:
        """The job goes to `status` at `at` seconds after T0 (a start sets started_at, an end finished_at)."""
        old = self.jobs[job_id]
        when = T0 + timedelta(seconds=at)
        started = when if status == "running" else old.started_at if status in ("completed", "failed") else None
        finished = when if status in ("completed", "failed") else None
        new = msgspec.structs.replace(
            old, status=status, version=old.version + 1, started_at=started, finished_at=finished
        )
        self.jobs[job_id] = new
        self.tracker.job_changed(Change(old_status=old.status, new_status=status, job=new, counted=counted))

    def run(self, job_id: int, start: float, seconds: float) -> None:
        self.move(job_id, "running", start)
        self.move(job_id, "completed", start + seconds)

    def refresh(self, wall: float = 0.0):  # noqa: ANN201
        """Refresh `REFRESH_EVERY` later on the relay's clock (always due); `wall`: seconds after T0."""
        self.now += REFRESH_EVERY + REFRESH_GAP
        return self.tracker.refresh(self.now, WALL0 + wall)


def learn(
    world: World, n: int = MIN_SAMPLES, seconds: float = 10.0, cluster: int = 1, kind: str = "preprocess"
) -> None:
    """`n` jobs of a kind completed on a cluster in `seconds` each (another trajectory's: they leave no work)."""
    for job_id in world.submit(n, trajectory=99, cluster=cluster, kind=kind):
        world.run(job_id, 0.0, seconds)


# -- durations


def test_a_duration_is_unknown_until_enough_jobs_completed() -> None:
    durations = Durations()
    for _ in range(MIN_SAMPLES - 1):
        durations.observe(1, "analysis", 8.0)
    assert durations.mean(1, "analysis") is None
    durations.observe(1, "analysis", 12.0)
    assert durations.mean(1, "analysis") == pytest.approx((8.0 * (MIN_SAMPLES - 1) + 12.0) / MIN_SAMPLES)
    assert durations.mean(2, "analysis") is None and durations.mean(1, "preprocess") is None


def test_durations_follow_a_cluster_that_slows_down_and_ignore_impossible_samples() -> None:
    durations = Durations()
    for _ in range(20):
        durations.observe(1, "rasterize", 10.0)
    for bad in (-1.0, float("nan"), float("inf")):
        durations.observe(1, "rasterize", bad)
    assert durations.mean(1, "rasterize") == pytest.approx(10.0)
    for _ in range(40):
        durations.observe(1, "rasterize", 20.0)
    assert durations.mean(1, "rasterize") == pytest.approx(20.0, rel=0.02)


# -- rounding and publishing


def test_figures_are_rounded_to_about_five_percent() -> None:
    assert [step(s) for s in (30, 120, 600, 1800, 7200, 36000)] == [5, 10, 30, 60, 300, 900]
    assert (rounded(2), rounded(42), rounded(722), rounded(1234)) == (1, 40, 720, 1260)


def test_a_figure_is_published_again_only_when_the_estimate_moved_by_more_than_its_step() -> None:
    assert settle(None, 600.4) == 600
    assert settle(600, 575) == 600  # inside a step: no flicker between neighbours
    assert settle(600, 539) == 540
    assert settle(600, None) is None and settle(None, None) is None


# -- one cluster


def test_nothing_is_estimated_until_the_kind_has_enough_samples_on_that_cluster() -> None:
    world = World()
    world.submit(20)
    learn(world, MIN_SAMPLES - 1)
    changes = world.refresh()
    assert changes is None or changes.trajectories.get(10) is None
    assert world.tracker.trajectories.get(10) is None
    learn(world, 1)
    learn(world, MIN_SAMPLES, cluster=2)  # another cluster's figures tell nothing about cluster 1's
    changes = world.refresh()
    assert changes is not None and changes.trajectories[10] is not None


def test_queued_work_is_shared_over_the_workers_seen_running_at_once() -> None:
    world = World()
    learn(world, seconds=10.0)
    ids = world.submit(100)
    for job_id in ids[:4]:
        world.move(job_id, "running", at=0.0)
    # Four running with work waiting: four workers. 96 waiting jobs of 10 s over 4 workers, and the running
    # ones' 10 s each.
    changes = world.refresh(wall=0.0)
    assert changes is not None
    assert changes.trajectories[10] == rounded((96 * 10 + 4 * 10) / 4)
    # Halfway through the running ones, 5 s of each is left: 245 s against 250, inside the step.
    world.now += REFRESH_EVERY
    assert world.tracker.refresh(world.now, WALL0 + 5.0) is None
    # They complete and the next four start: 92 waiting.
    for done, start in zip(ids[:4], ids[4:8], strict=True):
        world.move(done, "completed", at=10.0)
        world.move(start, "running", at=10.0)
    changes = world.refresh(wall=10.0)
    assert changes is not None and changes.trajectories[10] == rounded((92 * 10 + 4 * 10) / 4)


def test_a_running_job_past_its_mean_is_assumed_almost_done_not_done() -> None:
    world = World()
    learn(world, seconds=100.0)
    (job_id,) = world.submit(1, kind="preprocess")
    world.move(job_id, "running", at=0.0)
    changes = world.refresh(wall=400.0)
    assert changes is not None and changes.trajectories[10] == rounded(10.0)


def test_work_that_arrived_first_is_ahead() -> None:
    world = World()
    learn(world, seconds=10.0)
    first = world.submit(40, trajectory=1)
    world.submit(40, trajectory=2)
    for job_id in first[:4]:
        world.move(job_id, "running", at=0.0)
    changes = world.refresh(wall=0.0)
    assert changes is not None
    # Trajectory 1: its 36 waiting and the 4 running, over 4 workers. Trajectory 2 waits for all of that too.
    assert changes.trajectories[1] == rounded((36 * 10 + 40) / 4)
    assert changes.trajectories[2] == rounded((36 * 10 + 40 + 40 * 10) / 4)


def test_a_batch_is_never_done_sooner_than_its_own_longest_job() -> None:
    world = World()
    learn(world, seconds=10.0)
    learn(world, seconds=600.0, kind="storage_transfer")
    for _ in range(8):  # eight workers seen busy with a queue
        world.submit(1, trajectory=50)
    for job_id in range(world.next_id - 8, world.next_id):
        world.move(job_id, "running", at=0.0)
    world.submit(1, trajectory=3, kind="storage_transfer")
    world.refresh(wall=0.0)
    # Its place in the queue says (8 * 10 + 600) / 8 workers = 85 s; it takes 600 s itself.
    assert world.tracker.trajectories[3] == rounded(600.0)


def test_a_job_nobody_can_time_holds_one_worker_and_the_work_behind_it_is_still_timed() -> None:
    """A transfer no cluster has finished yet, queued ahead of pipeline work of a known kind: it cannot be timed
    itself, but it holds at most one of four workers, so what queued behind it is timed over the other three
    (it read "unknown" on every row of the cluster before)."""
    world = World()
    learn(world, seconds=10.0)
    first = world.submit(8, trajectory=1)
    for job_id in first[:4]:
        world.move(job_id, "running", at=0.0)  # four workers
    world.submit(1, trajectory=2, kind="storage_transfer")
    world.submit(30, trajectory=3)
    changes = world.refresh(wall=0.0)
    assert changes is not None
    assert changes.trajectories[1] == rounded((4 * 10 + 4 * 10) / 4)  # ahead of the transfer: all four workers
    assert 2 not in changes.trajectories  # the transfer itself: unknown, honestly (None, as before)
    assert changes.trajectories[3] == rounded((4 * 10 + 4 * 10 + 30 * 10) / 3)
    # Running, it still holds one worker: the queue behind it shares the other three.
    transfer = next(j for j in world.jobs.values() if j.kind == "storage_transfer")
    world.move(first[0], "completed", at=10.0)
    world.move(transfer.id, "running", at=10.0)
    changes = world.refresh(wall=10.0)
    assert world.tracker.trajectories[2] is None
    # (The three still running are due: each is taken to have OVERRUN of its 10 s left.)
    assert world.tracker.trajectories[3] == rounded((3 * 10 * OVERRUN + 4 * 10 + 30 * 10) / 3)


def test_work_behind_untimed_jobs_holding_every_worker_is_unknown() -> None:
    world = World()
    learn(world, seconds=10.0)
    transfers = world.submit(2, trajectory=1, kind="storage_transfer")
    for job_id in transfers:
        world.move(job_id, "running", at=0.0)
    world.submit(1, trajectory=1, kind="storage_transfer")  # a queue behind them: two workers, both held
    world.submit(5, trajectory=2)
    world.refresh(wall=0.0)
    assert world.tracker.trajectories.get(1) is None and world.tracker.trajectories.get(2) is None


def test_holding_or_silent_work_has_no_estimate() -> None:
    world = World()
    learn(world)
    held = world.submit(3, trajectory=1)
    silent = world.submit(3, trajectory=2)
    world.submit(3, trajectory=3)
    world.move(held[0], "holding")
    world.move(silent[0], "silent")
    changes = world.refresh()
    assert changes is not None
    assert 1 not in changes.trajectories and 2 not in changes.trajectories  # unknown: None, as before
    assert changes.trajectories[3] is not None
    world.move(held[0], "queued")
    changes = world.refresh()
    assert changes is not None and changes.trajectories[1] is not None


def test_an_owner_with_nothing_left_goes_back_to_none_once() -> None:
    world = World()
    learn(world)
    ids = world.submit(2)
    assert world.refresh() is not None and world.tracker.trajectories[10] is not None
    for job_id in ids:
        world.run(job_id, 0.0, 10.0)
    changes = world.refresh()
    assert changes is not None and changes.trajectories == {10: None}
    assert world.refresh() is None


def test_a_removed_or_failed_job_leaves_the_work() -> None:
    world = World()
    learn(world, seconds=10.0)
    ids = world.submit(3)
    world.move(ids[0], "failed")
    world.tracker.job_changed(Change(old_status="queued", new_status=None, job=world.jobs[ids[1]]))
    changes = world.refresh()
    assert changes is not None and changes.trajectories[10] == rounded(10.0)


def test_a_change_the_takeover_snapshot_counted_is_not_counted_again() -> None:
    world = World()
    learn(world, seconds=10.0)
    (job_id,) = world.submit(1)
    world.move(job_id, "running", at=0.0, counted=True)
    cluster = world.tracker.clusters[1]
    assert cluster.waiting == 1 and not cluster.running


# -- owners


def test_an_owner_on_two_clusters_finishes_when_its_last_batch_does() -> None:
    world = World()
    learn(world, seconds=10.0, cluster=1)
    learn(world, seconds=10.0, cluster=2)
    world.submit(4, trajectory=7, cluster=1, submission=70)
    world.submit(40, trajectory=7, cluster=2, submission=70)
    changes = world.refresh()
    assert changes is not None
    # No worker seen busy with a queue yet: one, until more are seen running at once.
    assert changes.trajectories[7] == changes.submissions[70] == rounded(400.0)


def test_analyses_each_get_their_figure_most_recent_first() -> None:
    world = World()
    learn(world, seconds=10.0, kind="analysis")
    world.submit(10, trajectory=5, kind="analysis", submission=50, analysis=1)
    world.submit(10, trajectory=5, kind="analysis", submission=50, analysis=2)
    world.submit(10, trajectory=6, kind="preprocess")  # no samples of preprocess: unknown, and no analysis
    changes = world.refresh()
    assert changes is not None
    assert changes.analyses == {5: [AnalysisEta(id=2, eta=200), AnalysisEta(id=1, eta=100)]}
    assert changes.submissions == {50: 200} and changes.trajectories == {5: 200}
    assert world.refresh() is None  # nothing moved


# -- the relay's start


def test_a_takeover_snapshot_gives_the_same_figures_as_the_changes_did() -> None:
    world = World()
    learn(world, seconds=10.0)
    ids = world.submit(30, trajectory=1, submission=3)
    world.submit(30, trajectory=2, submission=4)
    for job_id in ids[:4]:
        world.move(job_id, "running", at=0.0)
    world.move(ids[4], "holding")
    from_changes = world.refresh(wall=2.0)
    snapshot = WorkSnapshot(
        waiting=[
            WaitingWork(1, "preprocess", 1, 3, None, "queued", 25),
            WaitingWork(1, "preprocess", 1, 3, None, "holding", 1),
            WaitingWork(1, "preprocess", 2, 4, None, "queued", 30),
        ],
        running=[RunningJob(i, 1, "preprocess", 1, 3, None, WALL0) for i in ids[:4]],
        durations=[RecentDurations(1, "preprocess", MIN_SAMPLES, 10.0)],
    )
    loaded = World()
    loaded.tracker.load(snapshot)
    loaded.tracker.clusters[1].workers.extend(world.tracker.clusters[1].workers)
    assert loaded.refresh(wall=2.0) == from_changes


# -- refreshing


def test_estimates_are_recomputed_at_most_once_a_gap_and_while_jobs_run_every_few_seconds() -> None:
    tracker = EtaTracker()
    assert tracker.next_due() is None
    world = World(tracker)
    learn(world)
    (job_id,) = world.submit(1)
    assert tracker.next_due() is not None
    tracker.refresh(100.0, WALL0)
    assert tracker.next_due() is None  # queued only: nothing moves its figure but a change
    world.move(job_id, "running", at=0.0)
    assert tracker.next_due() == 100.0 + REFRESH_GAP
    assert tracker.refresh(100.5, WALL0) is None  # not due yet
    tracker.refresh(101.0, WALL0)
    assert tracker.next_due() == 101.0 + REFRESH_EVERY  # running: its time left shrinks as it runs


# -- on the wire


def relay() -> Batcher:
    core = Batcher(epoch=1)
    core.add_trajectory(10, 1, "Water")
    core.set_seqs({"trajectory:10": 0, "team-jobs:1": 0, "team:1": 0})
    return core


def test_the_summary_and_the_row_carry_the_figures_and_leave_them_out_while_unknown() -> None:
    core = relay()
    record = SubmissionRecord(id=50, team_id=1, trajectory_id=10, title="Pipeline run")
    core.apply([SubmissionChange(record=record)])
    world = World(core.eta)
    learn(world, seconds=10.0, kind="analysis")
    jobs = []
    for i in range(6):
        job = Job(
            id=1000 + i,
            team_id=1,
            trajectory_id=10,
            cluster_id=1,
            kind="analysis",
            name="RDF",
            status="queued",
            version=1,
            submission_id=50,
            analysis_id=8,
            frame=i,
        )
        jobs.append(Change(old_status=None, new_status="queued", job=job))
    core.apply(jobs, now=0.0)
    first = core.take_team_publications(0.0)
    assert "eta" not in msgspec.json.decode(first[0].json)["trajectories"][0]  # not known before the refresh
    core.refresh_eta(10.0, WALL0)
    (published,) = core.take_team_publications(10.0)
    summary = decode_server(published.json, "json")
    assert isinstance(summary.trajectories[0], TrajectorySummary)  # type: ignore[union-attr]
    (traj,) = summary.trajectories  # type: ignore[union-attr]
    assert traj.eta == 60 and traj.analyses == [AnalysisEta(id=8, eta=60)]
    (row,) = summary.submissions  # type: ignore[union-attr]
    assert row.eta == 60
    wire = msgspec.json.decode(published.json)
    assert wire["trajectories"][0]["analyses"] == [{"id": 8, "eta": 60}]


def test_a_summary_and_a_row_leave_their_defaults_out() -> None:
    summary = TrajectorySummary(id=1, name="Water", completed=0, total=1, status="queued", counts=Counts(queued=1))
    assert set(msgspec.json.decode(msgspec.json.encode(summary))) == {
        "id",
        "name",
        "completed",
        "total",
        "status",
        "counts",
    }
    row = SubmissionRow(
        id=1,
        trajectory_id=None,
        user_id=None,
        project="",
        title="t",
        priority=0,
        instance_type="standard",
        cores=4,
        memory_gb=16,
        preemptible=False,
        staging="ready",
        held=False,
        reviewed=False,
        downloaded=False,
        created_at=None,
        updated_at=None,
        status="pending",
        tasks=0,
        counts=Counts(),
        avg_frame=None,
        version=1,
    )
    wire = msgspec.json.decode(msgspec.json.encode(row))
    assert "eta" not in wire and wire["trajectory_id"] is None and wire["avg_frame"] is None


# -- work that is stuck


def test_a_job_is_running_longer_than_usual_from_the_documented_multiple_rounded() -> None:
    assert STUCK_MULTIPLE == 4
    assert longer_than_usual(399.0, 100.0) is None
    assert longer_than_usual(400.0, 100.0) == 4
    assert longer_than_usual(649.0, 100.0) == 6
    assert longer_than_usual(1000.0, None) is None  # its kind's usual duration there is not known
    assert longer_than_usual(40.0, 5.0) is None  # a short job is not stuck before it ran a minute
    assert longer_than_usual(60.0, 5.0) == 12


def test_a_refresh_names_the_jobs_running_longer_than_usual_and_their_multiple_as_it_grows() -> None:
    world = World()
    learn(world, seconds=100.0)
    slow, fine = world.submit(2, kind="preprocess")
    world.move(slow, "running", at=0.0)
    world.move(fine, "running", at=300.0)
    changes = world.refresh(wall=350.0)
    assert changes is not None and changes.overruns == {}
    changes = world.refresh(wall=420.0)
    assert changes is not None and changes.overruns == {10: (1, [Overrun(id=slow, times=4)])}
    changes = world.refresh(wall=520.0)
    assert changes is not None and changes.overruns == {10: (1, [Overrun(id=slow, times=5)])}
    world.move(slow, "completed", at=530.0)
    changes = world.refresh(wall=540.0)
    assert changes is not None and changes.overruns == {10: (0, None)}


def test_a_refresh_names_a_job_from_exactly_the_multiple_and_never_one_of_a_kind_nobody_can_time() -> None:
    world = World()
    learn(world, seconds=100.0)
    (edge,) = world.submit(1, kind="preprocess")
    (untimed,) = world.submit(1, kind="analysis")  # no analysis has completed on this cluster
    world.move(edge, "running", at=20.0)
    world.move(untimed, "running", at=0.0)
    changes = world.refresh(wall=419.0)
    assert changes is None or changes.overruns == {}
    changes = world.refresh(wall=420.0)  # ran 400 s: exactly 4 times the usual 100
    assert changes is not None and changes.overruns == {10: (1, [Overrun(id=edge, times=4)])}


def test_the_summary_counts_the_stuck_jobs_and_names_who_submitted_them() -> None:
    core = relay()
    core.apply([SubmissionChange(record=SubmissionRecord(id=50, team_id=1, trajectory_id=10, user_id=7, title="Run"))])
    world = World(core.eta)
    learn(world, seconds=100.0, kind="analysis")
    job = Job(
        id=1000, team_id=1, trajectory_id=10, cluster_id=1, kind="analysis", name="RDF", status="queued", version=1,
        submission_id=50, analysis_id=8,
    )  # fmt: skip
    started = msgspec.structs.replace(job, status="running", version=2, started_at=T0)
    core.apply([Change(old_status=None, new_status="queued", job=job)], now=0.0)
    core.apply([Change(old_status="queued", new_status="running", job=started)], now=0.0)
    core.take_team_publications(0.0)
    core.refresh_eta(10.0, WALL0 + 700.0)
    (published,) = core.take_team_publications(10.0)
    wire = msgspec.json.decode(published.json)
    (traj,) = wire["trajectories"]
    assert traj["stuck"] == 1 and traj["overruns"] == [{"id": 1000, "times": 7, "user": 7}]
