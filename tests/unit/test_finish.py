"""Finish notices and glows: a wave of work finishes once, after the settle time, titled by what it held; a wave a
person cut short (removed or killed its jobs) ends silently; the glow needs every listed job completed."""

from hypothesis import given
from hypothesis import strategies as st

from gateway.bus.memory import MemoryBroker
from gateway.core.aggregate import Change, SubmissionChange
from gateway.core.batching import Batcher
from gateway.core.control import KILLED
from gateway.core.finish import SETTLE, FinishTracker, Wave, cuts_short, every_job_completed
from gateway.core.grouping import TRANSFERS
from gateway.core.model import Counts, Job
from gateway.core.protocol import Glow, Notice, decode_server
from gateway.core.submission import SubmissionRecord


def job(
    id: int, status: str, version: int, kind: str = "preprocess", frame: int | None = 0, trajectory: int = 10
) -> Job:
    return Job(
        id=id,
        team_id=1,
        trajectory_id=trajectory,
        cluster_id=1,
        kind=kind,
        name=kind,
        status=status,
        version=version,
        frame=frame,
        timestep=frame * 0.5 if frame is not None else None,
    )


def change(old: str | None, new: str | None, j: Job) -> Change:
    return Change(old_status=old, new_status=new, job=j)


def relay() -> Batcher:
    core = Batcher(epoch=1)
    core.add_trajectory(10, 1, "Water")
    core.set_seqs({"trajectory:10": 0, "team-jobs:1": 0, "team:1": 0})
    return core


def test_a_wave_finishes_only_after_the_settle_time() -> None:
    core = relay()
    core.apply([change(None, "queued", job(1, "queued", 1))], now=0.0)
    core.apply([change("queued", "completed", job(1, "completed", 2))], now=1.0)
    assert core.take_finishes(1.0 + SETTLE / 2) == []
    assert core.finishes.next_due() == 1.0 + SETTLE
    (finish,) = core.take_finishes(1.0 + SETTLE)
    assert (finish.title, finish.level, finish.glow) == ("Jobs completed successfully", "success", True)
    assert core.take_finishes(100.0) == []  # once


def test_a_chunked_upload_does_not_finish_between_chunks() -> None:
    core = relay()
    core.apply([change(None, "completed", job(1, "completed", 1))], now=0.0)  # not work starting
    core.apply([change(None, "queued", job(2, "queued", 1, kind="rasterize", frame=None))], now=0.0)
    core.apply([change("queued", "completed", job(2, "completed", 2, kind="rasterize", frame=None))], now=1.0)
    core.apply([change(None, "queued", job(3, "queued", 1))], now=1.0 + SETTLE * 0.8)  # the next chunk
    assert core.take_finishes(1.0 + SETTLE * 1.5) == []
    core.apply([change("queued", "failed", job(3, "failed", 2))], now=3.0)
    (finish,) = core.take_finishes(3.0 + SETTLE)
    assert (finish.title, finish.level, finish.glow) == ("Rasterization completed with errors", "warning", False)


def test_an_analysis_wave_with_artifact_uploads_is_titled_analysis() -> None:
    core = relay()
    core.apply([change(None, "running", job(1, "running", 1, kind="analysis"))], now=0.0)
    core.apply(
        [
            change("running", "completed", job(1, "completed", 2, kind="analysis")),
            change(None, "queued", job(2, "queued", 1, kind="artifact_upload", frame=None)),
        ],
        now=0.2,
    )
    core.apply([change("queued", "completed", job(2, "completed", 2, kind="artifact_upload", frame=None))], now=0.4)
    (finish,) = core.take_finishes(0.4 + SETTLE)
    assert finish.title == "Analysis completed successfully!"


def test_no_glow_while_earlier_failures_are_still_listed() -> None:
    core = relay()
    core.apply([change(None, "failed", job(1, "failed", 1))], now=0.0)
    core.apply(
        [
            change(None, "queued", job(2, "queued", 1)),
        ],
        now=1.0,
    )
    core.apply([change("queued", "completed", job(2, "completed", 2))], now=2.0)
    (finish,) = core.take_finishes(2.0 + SETTLE)
    assert finish.title == "Jobs completed successfully" and finish.glow is False


def test_finish_publications_are_a_notice_on_both_channels_and_a_glow() -> None:
    core = relay()
    core.apply(
        [change(None, "queued", job(1, "queued", 1)), change("queued", "completed", job(1, "completed", 2))], now=0.0
    )
    finishes = core.take_finishes(SETTLE)
    broker = MemoryBroker()
    marker = broker.publisher(broker.partitions.tags[0], 1, 100, 60).marker(10, 1)  # as the relay names it
    pubs = core.finish_publications(finishes, {(10, 1): marker})
    notice, team_notice, glow = (decode_server(p.json, "json") for p in pubs)
    assert isinstance(notice, Notice) and isinstance(team_notice, Notice) and isinstance(glow, Glow)
    assert (notice.channel, notice.trajectory_id, notice.wave, notice.title, notice.name) == (
        "trajectory:10",
        10,
        1,
        "Jobs completed successfully",
        "Water",
    )
    # The team channel carries the same words: a page hears every finish of its team, whichever panel is open.
    assert (team_notice.channel, team_notice.title, team_notice.name) == ("team:1", notice.title, "Water")
    assert (glow.channel, glow.trajectory_id, glow.wave) == ("team:1", 10, 1)
    assert [p.marker for p in pubs] == [None, None, marker]  # set with the last of them


def test_a_finish_with_errors_is_two_notices_and_no_glow() -> None:
    core = relay()
    core.apply([change(None, "queued", job(1, "queued", 1))], now=0.0)
    core.apply([change("queued", "failed", job(1, "failed", 2))], now=0.1)
    pubs = core.finish_publications(core.take_finishes(0.1 + SETTLE), {(10, 1): "m"})
    messages = [decode_server(p.json, "json") for p in pubs]
    assert [(type(m).__name__, m.channel) for m in messages] == [("Notice", "trajectory:10"), ("Notice", "team:1")]
    assert pubs[-1].marker == "m"


def submitted(id: int, status: str, version: int, submission: int, error: str | None = None) -> Job:
    j = job(id, status, version)
    j.submission_id, j.error = submission, error
    return j


def test_the_notice_names_whose_submissions_the_wave_ran() -> None:
    core = relay()
    core.apply(
        [
            SubmissionChange(record=SubmissionRecord(id=5, team_id=1, trajectory_id=10, user_id=7, title="upload")),
            SubmissionChange(record=SubmissionRecord(id=6, team_id=1, trajectory_id=10, user_id=3, title="run")),
            SubmissionChange(record=SubmissionRecord(id=8, team_id=1, trajectory_id=10, title="a cluster's own")),
        ]
    )
    core.apply(
        [change(None, "queued", submitted(i, "queued", 1, s)) for i, s in ((1, 5), (2, 6), (3, 8), (4, 5))], now=0.0
    )
    core.apply(
        [change("queued", "completed", submitted(i, "completed", 2, s)) for i, s in ((1, 5), (2, 6), (3, 8), (4, 5))],
        now=0.2,
    )
    (finish,) = core.take_finishes(0.2 + SETTLE)
    assert finish.users == [3, 7]  # each once; a submission no person made names nobody
    notice = decode_server(core.finish_publications([finish], {})[1].json, "json")
    assert isinstance(notice, Notice) and notice.users == [3, 7]


def test_removing_the_running_jobs_ends_the_wave_silently() -> None:
    """'Analysis completed with errors' 0.7 s after jobs were removed by hand: a removal is not a completion."""
    core = relay()
    analysis = [job(i, "running", 1, kind="analysis", frame=i) for i in (1, 2, 3)]
    core.apply([change(None, "running", j) for j in analysis], now=0.0)
    core.apply([change("running", "completed", job(1, "completed", 2, kind="analysis", frame=1))], now=0.3)
    core.apply(  # Remove Running Jobs: the rest leave the list while still at work
        [change("running", None, job(i, "running", 2, kind="analysis", frame=i)) for i in (2, 3)], now=0.5
    )
    (finish,) = core.take_finishes(0.5 + SETTLE)
    assert finish.silent and not finish.glow
    assert core.finish_publications([finish], {(10, 1): "m"}) == []  # nothing goes out
    assert core.channels_for_finishes([finish]) == []
    core.apply([change(None, "queued", job(4, "queued", 1))], now=5.0)  # new work: a new wave, told as usual
    core.apply([change("queued", "completed", job(4, "completed", 2))], now=5.1)
    (again,) = core.take_finishes(5.1 + SETTLE)
    assert (again.wave, again.silent, again.title) == (2, False, "Jobs completed successfully")


def test_killing_a_submissions_tasks_ends_the_wave_silently() -> None:
    core = relay()
    core.apply([change(None, "running", submitted(i, "running", 1, 5)) for i in (1, 2)], now=0.0)
    core.apply([change("running", "failed", submitted(i, "failed", 2, 5, error=KILLED)) for i in (1, 2)], now=0.2)
    (finish,) = core.take_finishes(0.2 + SETTLE)
    assert finish.silent and not finish.glow


def test_a_job_that_failed_on_its_own_is_not_a_kill() -> None:
    core = relay()
    core.apply([change(None, "running", submitted(1, "running", 1, 5))], now=0.0)
    core.apply([change("running", "failed", submitted(1, "failed", 2, 5, error="worker exited with code 137"))], 0.1)
    (finish,) = core.take_finishes(0.1 + SETTLE)
    assert (finish.silent, finish.title, finish.level) == (False, "Jobs completed with errors", "warning")


def test_removing_finished_jobs_is_not_cutting_work_short() -> None:
    """Delete analysis tombstones the jobs that completed (its results): that stops nothing."""
    assert cuts_short("running", None, None) and cuts_short("holding", None, None) and cuts_short("queued", None, None)
    assert not cuts_short("completed", None, None) and not cuts_short("failed", None, None)
    assert not cuts_short(None, None, None)  # a job inserted already removed
    assert cuts_short("running", "failed", KILLED) and not cuts_short("running", "failed", "out of memory")
    assert not cuts_short("running", "completed", None)


def test_no_glow_while_a_preempted_job_is_still_listed() -> None:
    """Two trajectories glowed green while their row still said 'partly failed': a preempted job counts as Failed."""
    core = relay()
    core.apply([change(None, "preempted", job(1, "preempted", 1))], now=0.0)
    core.apply([change(None, "queued", job(2, "queued", 1))], now=1.0)
    core.apply([change("queued", "completed", job(2, "completed", 2))], now=2.0)
    (finish,) = core.take_finishes(2.0 + SETTLE)
    assert finish.title == "Jobs completed successfully" and finish.glow is False
    assert [type(decode_server(p.json, "json")).__name__ for p in core.finish_publications([finish], {})] == [
        "Notice",
        "Notice",
    ]


@given(st.lists(st.sampled_from(["queued", "running", "completed", "failed", "holding", "preempted"]), max_size=8))
def test_the_glow_needs_every_listed_job_completed(statuses: list[str]) -> None:
    counts = Counts()
    for status in statuses:
        counts.add(status, 1)
    assert every_job_completed(counts) == (bool(statuses) and set(statuses) == {"completed"})


def test_a_restored_wave_a_person_cut_short_stays_silent() -> None:
    tracker = FinishTracker()
    tracker.restore(10, 3, Wave(4, has_analysis=True, stopped=True, submissions={5}), idle_since=1.0)
    (finish,) = tracker.take_finished(1.0 + SETTLE, {10: 1})
    assert finish.silent and finish.submissions == {5}


def test_a_restored_open_wave_finishes_and_a_closed_one_never_repeats() -> None:
    tracker = FinishTracker()
    tracker.restore(10, 3, Wave(4, has_analysis=True), idle_since=5.0)
    tracker.restore(11, 7, None)
    (finish,) = tracker.take_finished(5.0 + SETTLE, {10: 1})
    assert (finish.trajectory_id, finish.wave, finish.title) == (10, 4, "Analysis completed successfully!")
    tracker.job_changed(11, "preprocess", "queued", 1, 6.0)
    assert tracker.take_started() == [(11, 8, None)]


def test_trajectory_batches_carry_the_groups_they_changed() -> None:
    core = relay()
    core.apply(
        [
            change(None, "running", job(1, "running", 1, frame=3)),
            change(None, "completed", job(2, "completed", 1, frame=3, kind="analysis")),
            change(None, "queued", job(3, "queued", 1, kind="storage_transfer", frame=None)),
        ]
    )
    pubs = {p.channel: decode_server(p.json, "json") for p in core.take_job_publications(now=0.0)}
    groups = {g.key: g for g in pubs["trajectory:10"].groups}
    assert groups["frame:3"].label == "Frame 3" and groups["frame:3"].timestep == 1.5
    assert groups["frame:3"].status == "running" and groups["frame:3"].counts == Counts(running=1, completed=1)
    assert groups[TRANSFERS].label == "Storage Transfer" and groups[TRANSFERS].open is True
    assert pubs["team-jobs:1"].groups is None
    core.apply(
        [
            change("running", None, job(1, "running", 2, frame=3)),
            change("completed", None, job(2, "completed", 2, frame=3, kind="analysis")),
        ]
    )
    pubs = {p.channel: decode_server(p.json, "json") for p in core.take_job_publications(now=1.0)}
    (gone,) = pubs["trajectory:10"].groups
    assert (gone.key, gone.total) == ("frame:3", 0)


# (trajectory, active jobs after the change, seconds since the previous step) or a cycle taking what finished
steps = st.lists(
    st.one_of(
        st.tuples(st.integers(1, 4), st.integers(0, 2), st.sampled_from([0.0, 0.1, 0.3, 0.6])),
        st.just(None),
    ),
    max_size=60,
)


@given(steps)
def test_a_wave_finishes_exactly_when_it_has_been_idle_for_the_settle_time(script: list) -> None:
    """Whatever the order of changes and cycles: a cycle takes exactly the waves with no active job for the settle
    time, each once, and `next_due` is the earliest time one of the others could finish."""
    tracker, now = FinishTracker(), 0.0
    idle_since: dict[int, float] = {}  # the model: open waves with no active job
    busy: set[int] = set()  # open waves with active jobs
    for step in script:
        if step is None:
            finished = tracker.take_finished(now, {})
            due = {t for t, since in idle_since.items() if now >= since + SETTLE}
            assert {f.trajectory_id for f in finished} == due
            for t in due:
                del idle_since[t]
        else:
            trajectory, active, gap = step
            now += gap
            opens = trajectory not in idle_since and trajectory not in busy
            status = "running" if active or opens else "completed"
            tracker.job_changed(trajectory, "preprocess", status, active, now)
            idle_since.pop(trajectory, None)
            busy.discard(trajectory)
            (idle_since.__setitem__(trajectory, now) if active == 0 else busy.add(trajectory))
        expected_due = min(idle_since.values()) + SETTLE if idle_since else None
        assert tracker.next_due() == expected_due
