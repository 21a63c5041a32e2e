"""The relay's core: exact counts from old and new statuses, coalescing, sequences, the light team channel."""

from datetime import UTC, datetime, timedelta

import msgspec

from gateway.core.aggregate import Change, OwnershipChange, TrajectoryAggregate
from gateway.core.batching import MAX_BATCH_BYTES, TEAM_INTERVAL, Batcher
from gateway.core.model import Counts, Job
from gateway.core.protocol import decode_server
from gateway.core.windows import MAX_TICK, MIN_TICK, batch_delay

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def job(id: int, status: str, version: int, trajectory: int = 10, team: int = 1, error: str | None = None) -> Job:
    return Job(
        id=id,
        team_id=team,
        trajectory_id=trajectory,
        cluster_id=1,
        kind="preprocess",
        name="Preprocess",
        status=status,
        version=version,
        frame=id,
        error=error,
        updated_at=T0 + timedelta(seconds=version),
    )


def change(old: str | None, new: str | None, j: Job) -> Change:
    return Change(old_status=old, new_status=new, job=j)


def core_with_trajectory(*ids: int) -> Batcher:
    core = Batcher(epoch=3)
    for i in ids:
        core.add_trajectory(i, 1, f"T{i}")
    return core


def test_counts_follow_old_and_new_statuses() -> None:
    core = core_with_trajectory(10)
    core.apply([change(None, "queued", job(1, "queued", 1)), change(None, "queued", job(2, "queued", 1))])
    core.apply([change("queued", "running", job(1, "running", 2)), change("queued", None, job(2, "queued", 2))])
    team = core.aggregates.teams[1]
    assert team.counts == Counts(running=1)
    assert team.trajectories[10].counts == Counts(running=1)


def test_changes_coalesce_per_job_latest_version_wins_whatever_the_order() -> None:
    core = core_with_trajectory(10)
    core.set_seqs({"trajectory:10": 0, "team-jobs:1": 0, "team:1": 0})
    # Commit order is not version order: the later version can be read first.
    core.apply(
        [change("running", "completed", job(1, "completed", 3)), change("queued", "running", job(1, "running", 2))]
    )
    pubs = {p.channel: p for p in core.take_job_publications(now=0.0)}
    batch = decode_server(pubs["trajectory:10"].json, "json")
    assert [(j.id, j.status, j.version) for j in batch.jobs] == [(1, "completed", 3)]
    assert core.take_job_publications(now=1.0) == []


def test_sequences_continue_from_the_previous_relay_and_stay_contiguous() -> None:
    core = core_with_trajectory(10)
    core.set_seqs({"trajectory:10": 41, "team-jobs:1": 7, "team:1": 0})
    core.apply([change(None, "queued", job(1, "queued", 1))])
    first = {p.channel: (p.epoch, p.seq) for p in core.take_job_publications(now=0.0)}
    core.apply([change("queued", "running", job(1, "running", 2))])
    second = {p.channel: (p.epoch, p.seq) for p in core.take_job_publications(now=1.0)}
    assert first == {"trajectory:10": (3, 42), "team-jobs:1": (3, 8)}
    assert second == {"trajectory:10": (3, 43), "team-jobs:1": (3, 9)}
    assert core.channels_without_seq() == []


def test_big_batches_are_split_under_the_byte_bound_with_contiguous_seqs() -> None:
    core = core_with_trajectory(10)
    core.set_seqs({"trajectory:10": 0, "team-jobs:1": 0})
    core.apply([change(None, "failed", job(i, "failed", 1, error="x" * 3000)) for i in range(1, 301)])
    pubs = [p for p in core.take_job_publications(now=0.0) if p.channel == "trajectory:10"]
    assert len(pubs) > 1
    assert [p.seq for p in pubs] == list(range(1, len(pubs) + 1))
    assert all(len(p.json) <= MAX_BATCH_BYTES for p in pubs)
    ids = [j.id for p in pubs for j in decode_server(p.json, "json").jobs]
    assert sorted(ids) == list(range(1, 301))


def test_team_channel_at_most_every_interval_with_absolute_values() -> None:
    core = core_with_trajectory(10, 11)
    core.set_seqs({"team:1": 0})
    core.apply([change(None, "queued", job(1, "queued", 1))])
    first = core.take_team_publications(now=100.0)
    assert len(first) == 1
    core.apply(
        [change("queued", "running", job(1, "running", 2)), change(None, "queued", job(2, "queued", 1, trajectory=11))]
    )
    assert core.take_team_publications(now=100.0 + TEAM_INTERVAL / 2) == []
    assert core.next_team_due() == 100.0 + TEAM_INTERVAL
    (second,) = core.take_team_publications(now=100.0 + TEAM_INTERVAL)
    summary = decode_server(second.json, "json")
    assert summary.counts == Counts(queued=1, running=1)
    assert [(s.id, s.status, s.completed, s.total) for s in summary.trajectories] == [
        (10, "running", 0, 1),
        (11, "queued", 0, 1),
    ]
    assert summary.total_trajectories == 2
    assert second.state_set is not None
    assert msgspec.msgpack.decode(second.state_set["counts"], type=Counts) == Counts(queued=1, running=1)


def test_a_trajectory_with_nothing_listed_leaves_the_team_state() -> None:
    core = core_with_trajectory(10)
    core.set_seqs({"team:1": 0})
    core.apply([change(None, "queued", job(1, "queued", 1))])
    core.take_team_publications(now=0.0)
    core.apply([change("queued", None, job(1, "queued", 2))])
    (pub,) = core.take_team_publications(now=10.0)
    assert pub.state_del == ["t:10"]


def test_load_publishes_every_team_once_from_the_snapshot() -> None:
    core = Batcher(epoch=1)
    core.load([TrajectoryAggregate(id=5, team_id=2, name="Water", counts=Counts(completed=3, failed=1))])
    core.set_seqs({"team:2": 9})
    (pub,) = core.take_team_publications(now=0.0)
    summary = decode_server(pub.json, "json")
    assert summary.seq == 10 and summary.counts == Counts(completed=3, failed=1)
    assert summary.trajectories[0].status == "neutral"


def test_a_channel_gathers_nothing_at_idle_and_up_to_a_tick_under_load() -> None:
    assert batch_delay(0) == 0
    assert batch_delay(1) == MIN_TICK  # a channel: at most 50 frames a second
    assert batch_delay(10_000) == MAX_TICK


def test_a_quiet_channel_publishes_at_once_while_a_busy_one_waits_for_its_window() -> None:
    core = core_with_trajectory(10, 11)
    core.set_seqs({"trajectory:10": 0, "trajectory:11": 0, "team-jobs:1": 0})
    core.apply([change(None, "queued", job(1, "queued", 1))])
    assert {p.channel for p in core.take_job_publications(now=100.0)} == {"trajectory:10", "team-jobs:1"}
    # 5 ms later trajectory 10 changes twice and trajectory 11 (quiet till now) once.
    core.apply(
        [
            change("queued", "running", job(1, "running", 2)),
            change("running", "completed", job(1, "completed", 3)),
            change(None, "queued", job(2, "queued", 1, trajectory=11)),
        ]
    )
    pubs = {p.channel: decode_server(p.json, "json") for p in core.take_job_publications(now=100.005)}
    assert set(pubs) == {"trajectory:11"}  # the busy ones (trajectory 10, the team's jobs) hold theirs
    assert [j.id for j in pubs["trajectory:11"].jobs] == [2]
    assert core.windows.next_due() == 100.0 + MIN_TICK  # the relay comes back when the first window ends
    assert core.take_job_publications(now=100.0 + MIN_TICK / 2) == []
    pubs = {p.channel: decode_server(p.json, "json") for p in core.take_job_publications(now=100.0 + MIN_TICK)}
    assert set(pubs) == {"trajectory:10", "team-jobs:1"}
    # Held, the two changes of job 1 went out as one, its latest; the team's jobs carry both jobs.
    assert [(j.id, j.version) for j in pubs["trajectory:10"].jobs] == [(1, 3)]
    assert pubs["trajectory:10"].groups  # the groups it changed travel with its batch, not before it
    assert sorted(j.id for j in pubs["team-jobs:1"].jobs) == [1, 2]
    assert pubs["trajectory:10"].seq == pubs["team-jobs:1"].seq == 2  # each channel's next: nothing skipped
    assert core.deltas_taken == 3  # job 1 twice (v1, then v3) and job 2: each counted on its trajectory


def test_unknown_trajectories_are_asked_for_before_apply() -> None:
    core = core_with_trajectory(10)
    assert core.unknown_trajectories([change(None, "queued", job(1, "queued", 1, trajectory=99))]) == {99}


def test_a_trajectory_moved_to_another_team_is_announced_and_registered_again_under_it() -> None:
    core = core_with_trajectory(10)
    moved = OwnershipChange(channel="trajectory:10", team_id=2, previous_team_id=1)
    core.apply([moved])
    assert core.take_ownerships() == [moved] and core.take_ownerships() == []
    assert core.take_memberships() == []  # announced on their own, never among membership changes
    # Its next job is asked for again (the adapter reads its team), then counted in its new team's state.
    arriving = change(None, "queued", job(1, "queued", 1, trajectory=10, team=2))
    assert core.unknown_trajectories([arriving]) == {10}
    core.add_trajectory(10, 2, "T10")
    core.apply([arriving])
    assert core.aggregates.team(2).counts.queued == 1 and 10 in core.aggregates.team(2).trajectories
    assert 10 not in core.aggregates.team(1).trajectories and core.aggregates.team(1).counts.total() == 0
