"""The publish cycle's machine under any interleaving of commits, bus failures, bus losses and takeovers.

A model of the bus stands in for Redis (the fenced publish script's semantics: the fence, positions that make a
retried message a no-op, the relay cursor it checks, markers) and a list stands in for the outbox; a driver
carries the machine's actions out as gateway.relay.cycle does, failing the calls a drawn plan says to fail. No
Redis, no PostgreSQL, no event loop.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import msgspec
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from gateway.core.aggregate import AnyChange, Change, MembershipChange, MembershipsChanged, OwnershipsChanged
from gateway.core.batching import Batcher
from gateway.core.cycle_actions import (
    ANNOUNCED,
    BEHIND,
    DONE,
    FOUND_BEHIND,
    LOCK_PROVED,
    NOT_BEHIND,
    PUBLISHED,
    RECORDED,
    SAVED,
    WAITED,
    Action,
    Announce,
    CheckBus,
    CollectExtras,
    Event,
    ExtrasCollected,
    Failed,
    FenceRaised,
    MarkersRead,
    ProveLock,
    Publish,
    RaiseFence,
    ReadMarkers,
    ReadSeqs,
    RecordClosed,
    SaveRows,
    SeqsRead,
    Wait,
)
from gateway.core.finish import Wave
from gateway.core.model import Job
from gateway.core.protocol import Batch, Notice, Summary, decode_server
from gateway.core.publication import Publication
from gateway.core.publish_cycle import InvalidEvent, PublishCycle
from gateway.core.status import ACTIVE
from gateway.core.team import Presence

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TEAMS = {1: (10, 11), 2: (20,)}  # team -> its trajectories
JOBS = {1: 10, 2: 10, 3: 11, 4: 11, 5: 20}  # job -> its trajectory (20 has one: its waves finish often)
TEAM_OF = {t: team for team, trajectories in TEAMS.items() for t in trajectories}
NEXT_STATUS = {None: "queued", "queued": "running", "running": "completed", "completed": "queued"}
SETTLE = 0.05  # a wave finishes this long after its trajectory's last active job (short: waves finish often)
# What each try on the bus does: goes out; never reaches it; goes out but its answer is lost; is refused whole.
OUTCOMES = ("ok", "lost", "answer_lost", "refused")


class LockLost(Exception):
    pass


@dataclass
class BusState:
    """What Redis holds for the partition."""

    fence: int | None = None
    cursor: str | None = None
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)
    markers: set[str] = field(default_factory=set)


class ModelBus:
    """The fenced publish script's semantics (gateway.bus.publisher), and what it took, in order."""

    def __init__(self) -> None:
        self.state = BusState()
        self.replica = BusState()  # a replica that stopped receiving at some point
        self.accepted: list[tuple[int, str, int, bytes]] = []  # (epoch, channel, seq, message) as taken
        self.markers_set: set[str] = set()  # every finish marker the bus ever took

    def behind(self, expected: str | None) -> bool:
        s = self.state
        return s.fence is None or (expected is not None and s.cursor != expected)

    def publish(
        self, epoch: int, publications: list[Publication], cursor: str | None, expected: str | None, kept: bool
    ) -> str:
        """The script's answer; `kept`: the bus kept everything since the relay's epoch began (then a channel's
        first message in the epoch continues the sequence of the relay before it)."""
        s = self.state
        if (s.fence or 0) > epoch:
            return "fenced"
        if expected is not None and s.cursor != expected and not (cursor is not None and s.cursor == cursor):
            return "behind"
        for p in publications:
            at = s.positions.get(p.channel)
            if at is not None and at[0] == epoch and at[1] >= p.seq:
                continue  # went out with an earlier try of the cycle
            if kept and at is not None and at[0] != epoch:
                assert p.seq == at[1] + 1, f"{p.channel}: epoch {epoch} starts at {p.seq}, after {at}"
            s.positions[p.channel] = (epoch, p.seq)
            self.accepted.append((epoch, p.channel, p.seq, p.msgpack))
            if p.marker is not None:
                s.markers.add(p.marker)
                self.markers_set.add(p.marker)
        if cursor is not None:
            s.cursor = cursor
        return "ok"


@dataclass
class Relay:
    """One relay epoch: its batcher and machine, where its outbox read is, the cursor its publisher expects."""

    epoch: int
    machine: PublishCycle
    read_up_to: int  # outbox rows before this index are read
    started_at: int  # where this epoch began reading (the bus's cursor): rows from here on are its to publish
    snapshot_at: int  # rows before this index are in the takeover's counts
    expected: str | None  # the relay cursor the publisher last read or wrote
    lost_data: bool = False  # the bus lost data since this epoch began: a message may be taken again


def marker(trajectory_id: int, wave: int) -> str:
    return f"finished:{trajectory_id}:{wave}"


def cursor_at(index: int) -> str:
    return f"0:{index}"


def index_of(cursor: str | None) -> int:
    return 0 if cursor is None else int(cursor.split(":")[1])


class PublishCycleUnderAnyInterleaving(RuleBasedStateMachine):
    """Whatever happens, per epoch and channel the bus takes the relay's messages in order with no gap and
    never two different messages at one position; a cycle's cursor goes out with its messages; a fenced relay
    publishes nothing more; a bus that lost what was published gets every team's whole state after the fence
    is raised again; and once things settle every change read since the epoch began is published."""

    @initialize()
    def start(self) -> None:
        self.now = 1000.0
        self.bus = ModelBus()
        self.outbox: list[AnyChange] = []
        self.jobs: dict[int, Job] = {}
        self.announced: list[MembershipChange] = []
        self.waves: dict[tuple[int, int], bool] = {}  # the database's waves: open or closed
        self.lost_markers: set[str] = set()  # finish markers a restart or a failover lost
        self.relay = self._take_over(1)

    # -- the world

    @rule(job_id=st.sampled_from([1, 2, 3, 4, 5, 5, 5]))  # most often the job alone on its trajectory
    def commit(self, job_id: int) -> None:
        """A job moves on (a new job first): its row in the outbox."""
        old = self.jobs.get(job_id)
        old_status = old.status if old is not None else None
        new_status = NEXT_STATUS[old_status]
        version = old.version + 1 if old is not None else 1
        trajectory = JOBS[job_id]
        job = Job(
            id=job_id,
            team_id=TEAM_OF[trajectory],
            trajectory_id=trajectory,
            cluster_id=1,
            kind="preprocess",
            name="Preprocess",
            status=new_status,
            version=version,
            frame=job_id,
            updated_at=T0 + timedelta(seconds=self.now - 1000 + version * 1e-3),
        )
        self.jobs[job_id] = job
        self.outbox.append(Change(old_status=old_status, new_status=new_status, job=job))

    @rule(team_id=st.sampled_from(sorted(TEAMS)), user_id=st.integers(1, 3), member=st.booleans())
    def membership(self, team_id: int, user_id: int, member: bool) -> None:
        self.outbox.append(MembershipChange(team_id=team_id, user_id=user_id, member=member))

    @rule(seconds=st.sampled_from([0.01, 0.03, 0.2, 0.6, 1.5]))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def bus_restarts_empty(self) -> None:
        self.lost_markers |= self.bus.state.markers
        self.bus.state = BusState()
        self.relay.lost_data = True

    @rule()
    def replica_stops_receiving(self) -> None:
        self.bus.replica = copy.deepcopy(self.bus.state)

    @rule()
    def bus_fails_over_to_the_replica(self) -> None:
        self.lost_markers |= self.bus.state.markers - self.bus.replica.markers
        self.bus.state, self.bus.replica = self.bus.replica, copy.deepcopy(self.bus.replica)
        self.relay.lost_data = True

    @rule()
    def a_newer_relay_raises_the_fence(self) -> None:
        self.bus.state.fence = self.relay.epoch + 1

    @precondition(lambda self: self.relay.machine.ended or (self.bus.state.fence or 0) > self.relay.epoch)
    @rule()
    def a_successor_takes_over(self) -> None:
        self.relay = self._take_over(max(self.relay.epoch, self.bus.state.fence or 0) + 1)

    # -- the relay

    @precondition(lambda self: not self.relay.machine.ended)
    @rule(
        read=st.booleans(),
        extras=st.booleans(),
        plan=st.lists(st.sampled_from(OUTCOMES + ("lock_lost",)), max_size=5),
        dies_before_recording=st.booleans(),
    )
    def cycle(self, read: bool, extras: bool, plan: list[str], dies_before_recording: bool) -> None:
        """A cycle; `plan`: what its tries on the bus do in turn (then they go out), "lock_lost" at a proof of
        the lock; `dies_before_recording`: the relay dies between publishing finishes and recording them."""
        self._cycle(read, extras, plan, dies_before_recording)

    @precondition(lambda self: not self.relay.machine.ended)
    @rule(dies_before_recording=st.booleans())
    def quiet_cycle(self, dies_before_recording: bool) -> None:
        """A cycle that reads what was committed and goes out at the first try, a moment after the last."""
        self.now += 0.1
        self._cycle(True, False, [], dies_before_recording)

    @precondition(lambda self: not self.relay.machine.ended)
    @rule(plan=st.lists(st.sampled_from(OUTCOMES), max_size=3))
    def check_bus(self, plan: list[str]) -> None:
        """The relay's loop turns with nothing to publish: whether the bus still holds what it published."""
        relay = self.relay
        if not relay.machine.bus_check_due(self.now):
            return
        if plan and plan[0] != "ok":
            return  # the next publish, or the next check, finds out
        if relay.machine.bus_checked(self.bus.behind(relay.expected)):
            self._run(relay.machine.start(self.now, self._wall(), None), plan[1:], None)

    # -- what must hold

    @invariant()
    def each_epoch_s_channels_are_taken_in_order_with_no_gap_and_one_message_per_position(self) -> None:
        last: dict[tuple[int, str], int] = {}
        messages: dict[tuple[int, str, int], bytes] = {}
        for epoch, channel, seq, message in self.bus.accepted:
            before = last.get((epoch, channel))
            if before is not None:
                assert seq <= before + 1, f"{channel} jumped from {before} to {seq} in epoch {epoch}"
            taken = messages.setdefault((epoch, channel, seq), message)
            assert taken == message, f"{channel} {seq} in epoch {epoch}: two different messages"
            last[(epoch, channel)] = max(seq, before or 0)

    @invariant()
    def with_no_data_lost_nothing_is_taken_twice(self) -> None:
        if self.relay.lost_data:
            return
        mine = [(c, s) for e, c, s, _ in self.bus.accepted if e == self.relay.epoch]
        assert len(mine) == len(set(mine)), "a message taken twice"

    @invariant()
    def the_bus_cursor_never_runs_ahead_of_what_was_read(self) -> None:
        assert index_of(self.bus.state.cursor) <= len(self.outbox)

    def teardown(self) -> None:
        """Settle: the bus healthy, a relay serving, cycles until nothing is due; then everything this epoch read
        was published, and each team's last summary holds its counts."""
        if not hasattr(self, "relay"):
            return
        relay = self.relay
        if relay.machine.ended or (self.bus.state.fence or 0) > relay.epoch:
            relay = self.relay = self._take_over(max(relay.epoch, self.bus.state.fence or 0) + 1)
        for _ in range(6):  # the relay's loop: a cycle, then whether the bus still holds what it published
            self.now += 1.0
            self._cycle(read=True, extras=False, plan=[])
            self.check_bus([])
        if not relay.lost_data:  # else the bus's cursor is as the bus kept it, until the next change read
            assert index_of(self.bus.state.cursor) == relay.read_up_to == len(self.outbox)
        latest: dict[int, int] = {}
        summaries: dict[str, Summary] = {}
        for epoch, channel, _, message in self.bus.accepted:
            if epoch != relay.epoch:
                continue
            decoded = decode_server(message, "msgpack")
            if isinstance(decoded, Batch) and channel.startswith("trajectory:"):
                for j in decoded.jobs:
                    assert j.version > latest.get(j.id, 0), f"job {j.id} version {j.version} again or out of order"
                    latest[j.id] = j.version
            elif isinstance(decoded, Summary):
                summaries[channel] = decoded
        for index, change in enumerate(self.outbox):
            if index >= relay.started_at and isinstance(change, Change):
                job = self.jobs[change.job.id]
                assert latest.get(job.id) == job.version, f"job {job.id}: {latest.get(job.id)} != {job.version}"
        truth = Batcher(relay.epoch)
        for team_id, trajectories in TEAMS.items():
            for t in trajectories:
                truth.add_trajectory(t, team_id, f"T{t}")
        truth.apply(self.outbox)
        for team_id, team in truth.aggregates.teams.items():
            if team.counts.total():
                assert summaries[f"team:{team_id}"].counts == team.counts
        for (t, number), is_open in self.waves.items():
            traj = truth.aggregates.trajectory(t)
            if is_open and marker(t, number) in self.bus.markers_set and traj is not None and traj.active() == 0:
                raise AssertionError(f"wave {number} of {t} published and still open")
        last_wave: dict[int, tuple[int, bool]] = {}
        for (t, number), is_open in sorted(self.waves.items()):
            last_wave[t] = (number, is_open)
        for t in {c.job.trajectory_id for c in self.outbox if isinstance(c, Change) and c.new_status in ACTIVE}:
            traj = truth.aggregates.trajectory(t)
            if traj is not None and traj.active() == 0:  # its work is over: a relay finished it, whichever read it
                assert last_wave.get(t, (0, True))[1] is False, f"the work of {t} is over and its wave not closed"
        announced = [c for c in self.outbox[relay.started_at :] if isinstance(c, MembershipChange)]
        assert self.announced[len(self.announced) - len(announced) :] == announced
        notices = [
            (n.trajectory_id, n.wave)
            for _, channel, _, message in self.bus.accepted
            if channel.startswith("trajectory:") and isinstance(n := decode_server(message, "msgpack"), Notice)
        ]
        for t, number in set(notices):  # a finish whose marker the bus lost may be finished again, not another
            twice = notices.count((t, number)) > 1
            assert not twice or marker(t, number) in self.lost_markers, f"finish {number} of {t} published twice"

    # -- the relay's side, as gateway.relay.partition and gateway.relay.cycle do it

    def _take_over(self, epoch: int) -> Relay:
        """A takeover (gateway.relay.partition): the fence raised, every trajectory's counts as of now, the waves
        the database holds, and reading on from the bus's cursor (rows the snapshot saw replayed as deltas only)."""
        self.bus.state.fence = epoch
        snapshot = Batcher(epoch)
        for team_id, trajectories in TEAMS.items():
            for t in trajectories:
                snapshot.add_trajectory(t, team_id, f"T{t}")
        snapshot.apply(self.outbox)
        core = Batcher(epoch, settle=SETTLE)
        core.load([t for team in snapshot.aggregates.teams.values() for t in team.trajectories.values()])
        last: dict[int, tuple[int, bool]] = {}
        for (t, number), is_open in sorted(self.waves.items()):
            last[t] = (number, is_open)
        for t, (number, is_open) in last.items():
            traj = snapshot.aggregates.trajectory(t)
            idle = traj is None or traj.active() == 0
            if is_open:
                core.finishes.restore(t, number - 1, Wave(number), self.now if idle else None)
            else:
                core.finishes.restore(t, number, None)
        core.open_unrecorded_waves()
        start = index_of(self.bus.state.cursor)
        return Relay(epoch, PublishCycle(core, marker), start, start, len(self.outbox), self.bus.state.cursor)

    def _cycle(self, read: bool, extras: bool, plan: list[str], dies_before_recording: bool = False) -> None:
        relay = self.relay
        cursor = None
        if read and relay.read_up_to < len(self.outbox):
            changes = self.outbox[relay.read_up_to :]
            seen = max(0, relay.snapshot_at - relay.read_up_to)  # in the takeover's snapshot: not counted again
            changes[:seen] = [
                msgspec.structs.replace(c, counted=True) if isinstance(c, Change) else c for c in changes[:seen]
            ]
            relay.read_up_to = len(self.outbox)
            core = relay.machine.core
            core.apply(changes, self.now)
            for t, number, _ in core.finishes.take_started():
                self.waves[(t, number)] = True
            cursor = cursor_at(relay.read_up_to)
        self._run(relay.machine.start(self.now, self._wall(), cursor, extras), plan, cursor, dies_before_recording)

    def _run(self, action: Action, plan: list[str], cursor: str | None, dies_before_recording: bool = False) -> None:
        machine = self.relay.machine
        plan = list(plan)
        found_behind = machine.behind  # since the last raise of the fence, the bus was found behind
        for _ in range(1000):
            if action is DONE:
                if cursor is not None:
                    assert self.bus.state.cursor == cursor, "a cycle ended without its cursor on the bus"
                return
            if isinstance(action, RaiseFence):
                assert found_behind, "the fence raised again with no bus found behind"
            if isinstance(action, Publish):
                assert action.cursor == cursor, "a try without the cycle's cursor"
                assert not found_behind, "published to a bus found behind before the fence went up again"
            try:
                if dies_before_recording and isinstance(action, RecordClosed):
                    event("died between publishing a finish and recording it")
                    raise LockLost()
                answer = self._perform(action, plan)
            except LockLost:
                event("the lock lost")
                machine.abandon()
                assert machine.ended
                return
            if answer is None:  # fenced out
                event("fenced out")
                machine.fenced()
                try:
                    machine.start(self.now, self._wall(), None)
                except InvalidEvent:
                    return
                raise AssertionError("a fenced relay started another cycle")
            if answer is BEHIND or answer is FOUND_BEHIND:
                found_behind = True
            elif isinstance(answer, FenceRaised):
                event("every team's state sent again")
                found_behind = False
                self._expect_every_team = True
            action = machine.feed(answer)
        raise AssertionError("the cycle never ended")

    def _outcome(self, plan: list[str]) -> str:
        return plan.pop(0) if plan else "ok"

    def _perform(self, action: Action, plan: list[str]) -> Event | None:
        relay, bus = self.relay, self.bus
        match action:
            case ReadMarkers(markers):
                published = {m for m in markers if m in bus.state.markers}
                if published:
                    event("a finish found already published")
                return MarkersRead(published)
            case CollectExtras():
                return ExtrasCollected([(2, Presence(online=int(self.now) % 3, members=3, users=[]))])
            case ReadSeqs(channels):
                return SeqsRead({c: bus.state.positions.get(c, (0, 0))[1] for c in channels})
            case SaveRows():
                return SAVED
            case ProveLock():
                if plan and plan[0] == "lock_lost":
                    raise LockLost()
                return LOCK_PROVED
            case Wait(seconds):
                self.now += seconds
                return WAITED
            case CheckBus():
                if self._outcome(plan) != "ok":
                    return Failed(ConnectionError("lost"))
                return FOUND_BEHIND if bus.behind(relay.expected) else NOT_BEHIND
            case RaiseFence():
                outcome = self._outcome(plan)
                if outcome in ("lost", "refused"):
                    return Failed(ConnectionError(outcome))
                if (bus.state.fence or 0) > relay.epoch:
                    return None
                bus.state.fence = relay.epoch
                relay.expected = bus.state.cursor
                if outcome == "answer_lost":
                    return Failed(ConnectionError(outcome))
                return FenceRaised(self.now)
            case Publish(publications, cursor):
                outcome = self._outcome(plan)
                if outcome in ("lost", "refused", "lock_lost"):
                    return Failed(ConnectionError(outcome))
                every_team = getattr(self, "_expect_every_team", False)
                result = bus.publish(relay.epoch, publications, cursor, relay.expected, not relay.lost_data)
                if result == "fenced":
                    return None
                if result == "behind":
                    return BEHIND
                if every_team:
                    self._expect_every_team = False
                    channels = {p.channel for p in publications}
                    assert {f"team:{t}" for t in relay.machine.core.aggregates.teams} <= channels
                if outcome == "answer_lost":
                    event("a publish sent again after its answer was lost")
                    return Failed(ConnectionError(outcome))
                relay.expected = cursor or relay.expected
                return PUBLISHED
            case RecordClosed(waves):
                event("a wave closed")
                for t, w in waves:
                    self.waves[(t, w)] = False
                return RECORDED
            case Announce(MembershipsChanged(changes)):
                self.announced += changes
                return ANNOUNCED
            case Announce(OwnershipsChanged()):
                return ANNOUNCED
        raise AssertionError(f"unknown action {action!r}")

    def _wall(self) -> float:
        return T0.timestamp() + self.now - 1000


TestPublishCycleUnderAnyInterleaving = PublishCycleUnderAnyInterleaving.TestCase
TestPublishCycleUnderAnyInterleaving.settings = settings(
    max_examples=200, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
