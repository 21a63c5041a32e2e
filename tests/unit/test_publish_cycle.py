"""The publish cycle's machine (gateway.core.publish_cycle), one transition at a time: no relay, no bus, no clock."""

from __future__ import annotations

import msgspec
import pytest

from gateway.core.aggregate import Change, MembershipChange, MembershipsChanged
from gateway.core.batching import Batcher
from gateway.core.cycle_actions import (
    ANNOUNCED,
    BEHIND,
    CHECK_BUS,
    COLLECT_EXTRAS,
    DONE,
    FIRST_PROOF,
    FOUND_BEHIND,
    LOCK_PROVED,
    NOT_BEHIND,
    PUBLISHED,
    RAISE_FENCE,
    RECORDED,
    RETRY_PROOF,
    WAITED,
    Announce,
    ExtrasCollected,
    Failed,
    FenceRaised,
    MarkersRead,
    Publish,
    ReadMarkers,
    ReadSeqs,
    RecordClosed,
    SeqsRead,
    Wait,
)
from gateway.core.protocol import Batch, Notice, PresenceUpdate, Summary, decode_server
from gateway.core.publication import Publication
from gateway.core.publish_cycle import InvalidEvent, PublishCycle, Step
from gateway.core.team import Presence
from tests.unit.test_relay_core import T0, job  # the same jobs the batcher's own tests fold

NOW = 1000.0
WALL = T0.timestamp()


def marker(trajectory_id: int, wave: int) -> str:
    return f"finished:{trajectory_id}:{wave}"


def machine(settle: float = 0.5) -> PublishCycle:
    core = Batcher(epoch=3, settle=settle)
    core.add_trajectory(10, 1, "T10")
    core.add_trajectory(20, 2, "T20")
    return PublishCycle(core, marker)


def with_a_change(m: PublishCycle) -> PublishCycle:
    m.core.apply([Change(old_status=None, new_status="queued", job=job(1, "queued", 1))], NOW)
    return m


def decoded(publications: list[Publication]) -> list[object]:
    return [decode_server(p.msgpack, "msgpack") for p in publications]


def published_up_to(m: PublishCycle, action: object) -> Publish:
    """Through the sequence read and the lock's proof, to the cycle's publish."""
    if isinstance(action, ReadSeqs):
        action = m.feed(SeqsRead(dict.fromkeys(action.channels, 0)))
    assert action == FIRST_PROOF
    action = m.feed(LOCK_PROVED)
    assert isinstance(action, Publish)
    return action


def test_a_cycle_with_nothing_due_and_nothing_read_is_done_at_once() -> None:
    m = machine()
    assert m.start(NOW, WALL, None) == DONE
    assert m.step is Step.IDLE


def test_a_cycle_that_read_changes_publishes_its_cursor_even_with_no_message_due() -> None:
    m = machine()
    publish = published_up_to(m, m.start(NOW, WALL, "7:3"))
    assert publish == Publish([], "7:3")
    assert m.feed(PUBLISHED) == DONE


def test_channels_new_to_the_epoch_have_their_last_sequence_read_before_anything_is_stamped() -> None:
    m = with_a_change(machine())
    action = m.start(NOW, WALL, "7:3")
    assert isinstance(action, ReadSeqs)
    assert sorted(action.channels) == ["team-jobs:1", "team:1", "trajectory:10"]
    assert m.feed(SeqsRead({"team-jobs:1": 4, "team:1": 0, "trajectory:10": 41})) == FIRST_PROOF
    publish = m.feed(LOCK_PROVED)
    assert isinstance(publish, Publish) and publish.cursor == "7:3"
    assert {(p.channel, p.epoch, p.seq) for p in publish.publications} == {
        ("trajectory:10", 3, 42),
        ("team-jobs:1", 3, 5),
        ("team:1", 3, 1),
    }
    assert m.feed(PUBLISHED) == DONE
    # Known from now on: the next cycle reads nothing before it publishes.
    m.core.apply([Change(old_status="queued", new_status="running", job=job(1, "running", 2))], NOW + 1)
    assert m.start(NOW + 1, WALL, "7:4") == FIRST_PROOF


def test_a_failed_publish_waits_backing_off_proves_the_lock_checks_the_bus_and_sends_the_same_messages() -> None:
    m = with_a_change(machine())
    first = published_up_to(m, m.start(NOW, WALL, "7:3"))
    delays = []
    for _ in range(8):
        wait = m.feed(Failed(ConnectionError("lost")))
        assert isinstance(wait, Wait)
        delays.append(wait.seconds)
        assert m.feed(WAITED) == RETRY_PROOF
        assert m.feed(LOCK_PROVED) == CHECK_BUS
        again = m.feed(NOT_BEHIND)
        assert isinstance(again, Publish)
        assert again.publications is first.publications and again.cursor == "7:3"  # kept, not taken again
    assert delays == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0]
    assert m.feed(PUBLISHED) == DONE


def test_a_bus_check_that_fails_between_tries_is_taken_as_not_behind() -> None:
    m = with_a_change(machine())
    published_up_to(m, m.start(NOW, WALL, "7:3"))
    m.feed(Failed(ConnectionError("lost")))
    m.feed(WAITED)
    m.feed(LOCK_PROVED)
    assert isinstance(m.feed(Failed(TimeoutError())), Publish)
    assert not m.behind


def test_a_bus_that_lost_what_was_published_is_fenced_again_and_given_every_team_s_whole_state() -> None:
    m = with_a_change(machine())
    first = published_up_to(m, m.start(NOW, WALL, "7:3"))
    cycle_messages = list(first.publications)
    assert isinstance(m.feed(BEHIND), Wait) and m.behind
    m.feed(WAITED)
    m.feed(LOCK_PROVED)
    assert m.feed(NOT_BEHIND) == RAISE_FENCE  # found out by the publish: the check does not clear it
    publish = m.feed(FenceRaised(NOW + 0.2))
    assert isinstance(publish, Publish) and not m.behind
    assert publish.publications[: len(cycle_messages)] == cycle_messages
    refill = decoded(publish.publications[len(cycle_messages) :])
    assert {s.channel for s in refill if isinstance(s, Summary)} == {"team:1", "team:2"}
    assert m.feed(PUBLISHED) == DONE


def test_a_bus_found_behind_between_tries_is_fenced_again_before_the_next_try() -> None:
    m = with_a_change(machine())
    published_up_to(m, m.start(NOW, WALL, "7:3"))
    m.feed(Failed(ConnectionError("lost")))
    m.feed(WAITED)
    m.feed(LOCK_PROVED)
    assert m.feed(FOUND_BEHIND) == RAISE_FENCE


def test_raising_the_fence_again_is_retried_like_a_publish() -> None:
    m = with_a_change(machine())
    published_up_to(m, m.start(NOW, WALL, "7:3"))
    m.feed(BEHIND)
    m.feed(WAITED)
    m.feed(LOCK_PROVED)
    assert m.feed(NOT_BEHIND) == RAISE_FENCE
    assert m.feed(Failed(ConnectionError("lost"))) == Wait(0.1)
    m.feed(WAITED)
    m.feed(LOCK_PROVED)
    assert m.feed(NOT_BEHIND) == RAISE_FENCE  # still behind: the refill did not happen
    assert isinstance(m.feed(FenceRaised(NOW + 1)), Publish)


def test_a_bus_found_behind_with_nothing_to_publish_runs_a_cycle_to_send_every_team_s_state() -> None:
    m = machine()
    assert m.bus_check_due(NOW)
    assert not m.bus_check_due(NOW + 0.5)  # at most every second
    assert not m.bus_checked(False)
    assert m.bus_check_due(NOW + 1.0)
    assert m.bus_checked(True)
    assert m.start(NOW + 1.0, WALL, None) == FIRST_PROOF
    assert m.feed(LOCK_PROVED) == RAISE_FENCE
    publish = m.feed(FenceRaised(NOW + 1.0))
    assert isinstance(publish, Publish) and publish.cursor is None
    assert {p.channel for p in publish.publications} == {"team:1", "team:2"}


def finished_wave(m: PublishCycle) -> None:
    core = m.core
    core.apply([Change(old_status=None, new_status="running", job=job(1, "running", 1))], NOW - 2)
    core.apply([Change(old_status="running", new_status="completed", job=job(1, "completed", 2))], NOW - 1)
    core.finishes.take_started()


def test_a_finished_wave_is_published_with_its_marker_then_recorded_closed() -> None:
    m = machine(settle=0.5)
    finished_wave(m)
    action = m.start(NOW, WALL, "7:3")
    assert action == ReadMarkers([marker(10, 1)])
    publish = published_up_to(m, m.feed(MarkersRead(set())))
    notices = [(p, n) for p, n in zip(publish.publications, decoded(publish.publications)) if isinstance(n, Notice)]
    assert [(n.channel, n.wave) for _, n in notices] == [("trajectory:10", 1), ("team:1", 1)]
    assert [p.marker for p in publish.publications if p.marker] == [marker(10, 1)]
    assert m.feed(PUBLISHED) == RecordClosed([(10, 1)])  # published first, recorded second
    assert m.feed(RECORDED) == DONE


def test_a_finish_some_relay_already_published_is_not_published_again_but_still_recorded_closed() -> None:
    m = machine(settle=0.5)
    finished_wave(m)
    m.start(NOW, WALL, "7:3")
    publish = published_up_to(m, m.feed(MarkersRead({marker(10, 1)})))
    assert not any(isinstance(n, Notice) for n in decoded(publish.publications))
    assert m.feed(PUBLISHED) == RecordClosed([(10, 1)])


def test_a_finish_with_nothing_else_to_send_is_only_recorded() -> None:
    m = machine(settle=0.5)
    finished_wave(m)
    m.core.take_job_publications(NOW)
    m.core.set_seqs({"team:1": 0, "trajectory:10": 0, "team-jobs:1": 0})
    m.core.take_team_publications(NOW)
    m.start(NOW, WALL, None)
    assert m.feed(MarkersRead({marker(10, 1)})) == RecordClosed([(10, 1)])
    assert m.feed(RECORDED) == DONE


def test_extras_due_are_collected_and_published_on_their_team_channel() -> None:
    m = machine()
    assert m.start(NOW, WALL, None, extras_due=True) == COLLECT_EXTRAS
    action = m.feed(ExtrasCollected([(2, Presence(online=1, members=3, users=[7]))]))
    assert action == ReadSeqs(["team:2"])
    publish = published_up_to(m, action)
    (update,) = decoded(publish.publications)
    assert isinstance(update, PresenceUpdate) and update.channel == "team:2" and update.seq == 1
    assert publish.publications[0].state_set == {"presence": msgspec.msgpack.encode(update.presence)}


def test_membership_changes_are_announced_once_the_cycle_has_published() -> None:
    m = machine()
    m.core.apply([MembershipChange(team_id=1, user_id=7, member=True)], NOW)
    action = m.start(NOW, WALL, "7:3")
    assert action == FIRST_PROOF
    m.feed(LOCK_PROVED)
    announce = m.feed(PUBLISHED)
    assert announce == Announce(MembershipsChanged([MembershipChange(team_id=1, user_id=7, member=True)]))
    assert m.feed(ANNOUNCED) == DONE


def test_a_fenced_out_relay_publishes_nothing_more() -> None:
    m = with_a_change(machine())
    published_up_to(m, m.start(NOW, WALL, "7:3"))
    m.fenced()
    assert m.ended
    with pytest.raises(InvalidEvent, match="publish cycle is ended, expected idle"):
        m.start(NOW + 1, WALL, "7:4")


def test_a_cycle_cut_short_ends_the_epoch_but_abandoning_between_cycles_does_not() -> None:
    m = with_a_change(machine())
    m.abandon()
    assert m.step is Step.IDLE
    published_up_to(m, m.start(NOW, WALL, "7:3"))
    m.abandon()  # the lock was lost, or the bus out of reach: what was taken never went out
    assert m.ended


def test_an_event_the_step_does_not_take_is_a_bug_in_the_relay() -> None:
    m = with_a_change(machine())
    m.start(NOW, WALL, "7:3")
    with pytest.raises(InvalidEvent, match="publish cycle is seqs: it does not take Published"):
        m.feed(PUBLISHED)
    with pytest.raises(InvalidEvent, match="publish cycle is idle: it does not take Published"):
        machine().feed(PUBLISHED)


def test_a_cycle_started_while_one_runs_is_refused() -> None:
    m = with_a_change(machine())
    m.start(NOW, WALL, "7:3")
    with pytest.raises(InvalidEvent, match="publish cycle is seqs, expected idle"):
        m.start(NOW, WALL, "7:3")


def test_job_deltas_go_out_in_the_cycle_that_read_them() -> None:
    m = with_a_change(machine())
    publish = published_up_to(m, m.start(NOW, WALL, "7:3"))
    batches = [b for b in decoded(publish.publications) if isinstance(b, Batch)]
    assert {b.channel: [j.id for j in b.jobs] for b in batches} == {"trajectory:10": [1], "team-jobs:1": [1]}
