"""A subscription, alone: events in, actions out, no event loop. The stateful test drives it through
any interleaving of the bus, the history, the reads and a slow client, and checks what the client receives."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from gateway.core.protocol import make_cursor
from gateway.core.subscription import (
    MAX_REPLAY,
    REPLAY_READ,
    Action,
    GoLive,
    InvalidEvent,
    ReadBacklog,
    ReadPosition,
    ReadReplay,
    ReadSnapshot,
    Resync,
    Send,
    State,
    Subscription,
    WaitDrained,
)

CHANNEL = "trajectory:1"
Payload = tuple[str, int]


def sub(cursor: str | None = None) -> Subscription[Payload]:
    s: Subscription[Payload] = Subscription(CHANNEL)
    s.subscribed(cursor)
    return s


def sends(actions: list[Action[Payload]]) -> list[Payload]:
    return [a.payload for a in actions if isinstance(a, Send)]


def test_without_a_cursor_the_client_gets_a_snapshot_then_what_was_held_after_it() -> None:
    s = sub()
    assert s.actions() == [ReadSnapshot()]
    for seq in (4, 5, 6):
        assert s.message(seq, ("msg", seq), 10)  # held while the snapshot is read
    s.snapshot_page(("page", 5))
    s.snapshot_read(5)
    actions = s.actions()
    assert sends(actions) == [("page", 5), ("msg", 6)] and actions[-1] == WaitDrained()
    s.drained()
    assert s.actions() == [GoLive()] and s.state is State.LIVE
    assert not s.message(7, ("msg", 7), 10)  # live: the connection sends it


def test_a_cursor_the_history_still_reaches_replays_exactly_what_was_missed() -> None:
    s = sub(make_cursor(2, 10))
    assert s.actions() == [ReadPosition()]
    s.position_read((2, 13))
    assert s.actions() == [ReadReplay(10, 13)]  # the cursor's own message too: is it the client's?
    s.replay_read(10, 13, [(2, seq, ("msg", seq)) for seq in range(10, 14)])
    assert sends(s.actions()) == [("msg", 11), ("msg", 12), ("msg", 13)]


def test_a_long_resume_reads_a_block_with_the_cursor_and_the_rest_from_the_backlog_as_it_drains() -> None:
    """What one resume reads at once is bounded: the cursor's block, then the history a block at a time."""
    s = sub(make_cursor(2, 10))
    s.actions()
    s.position_read((2, 200))
    assert s.actions() == [ReadReplay(10, 10 + REPLAY_READ - 1)]
    s.replay_read(10, 41, [(2, seq, ("msg", seq)) for seq in range(10, 42)])
    actions = s.actions()
    assert sends(actions) == [("msg", seq) for seq in range(11, 42)] and actions[-1] == ReadBacklog(42, 200)
    s.backlog_read([("msg", seq) for seq in range(42, 65)])
    actions = s.actions()
    assert sends(actions) == [("msg", seq) for seq in range(42, 65)] and actions[-1] == ReadBacklog(65, 200)
    s.backlog_read(None)  # trimmed meanwhile (the byte bound): the client reloads
    assert s.actions() == [Resync("slow_consumer")]


def test_a_cursor_from_before_the_first_message_replays_from_the_first() -> None:
    s = sub(make_cursor(2, 0))
    s.actions()
    s.position_read((2, 2))
    assert s.actions() == [ReadReplay(1, 2)]
    s.replay_read(1, 2, [(2, 1, ("msg", 1)), (2, 2, ("msg", 2))])
    assert sends(s.actions()) == [("msg", 1), ("msg", 2)]


def test_a_cursor_at_the_position_goes_live_with_nothing_sent() -> None:
    s = sub(make_cursor(2, 10))
    s.actions()
    s.position_read((2, 10))
    assert s.actions() == [WaitDrained()]
    s.drained()
    assert s.actions() == [GoLive()]


@pytest.mark.parametrize(
    ("position", "entries"),
    [
        (None, None),  # the bus knows nothing of the channel
        ((2, 9), None),  # the cursor is ahead of the channel
        ((2, 10 + MAX_REPLAY + 1), None),  # too much missed: a snapshot is cheaper
        ((2, 12), [(3, 10, ("msg", 10)), (3, 11, ("msg", 11)), (3, 12, ("msg", 12))]),  # another relay's
        ((2, 12), [(2, 11, ("msg", 11)), (2, 12, ("msg", 12))]),  # the cursor's message was trimmed
    ],
)
def test_a_cursor_the_history_cannot_serve_gets_a_snapshot(position, entries) -> None:
    s = sub(make_cursor(2, 10))
    s.actions()
    s.position_read(position)
    if entries is not None:
        [read] = s.actions()
        assert isinstance(read, ReadReplay)
        s.replay_read(read.first, read.last, entries)
    assert s.actions() == [ReadSnapshot()] and s.state is State.SNAPSHOT


def test_a_cursor_that_is_not_ours_gets_a_snapshot() -> None:
    assert sub("not-a-cursor").actions() == [ReadSnapshot()]


def test_held_messages_past_the_bound_are_dropped_and_come_from_the_history() -> None:
    s = sub()
    s.actions()
    for seq in range(6, 10):
        s.message(seq, ("msg", seq), 10)
    s.bound_crossed(9)  # 6..9 dropped
    s.message(10, ("msg", 10), 10)
    assert s.held_bytes == 10
    s.snapshot_read(5)
    assert s.actions() == [ReadBacklog(6, 9)]
    s.backlog_read([("msg", 6), ("msg", 7)])  # a block ends at 7: the rest next
    actions = s.actions()
    assert sends(actions) == [("msg", 6), ("msg", 7)] and actions[-1] == ReadBacklog(8, 9)
    s.backlog_read([("msg", 8), ("msg", 9)])
    assert sends(s.actions()) == [("msg", 8), ("msg", 9), ("msg", 10)]


def test_a_live_channel_that_does_not_fit_catches_up_once_drained() -> None:
    s = sub()
    s.actions()
    s.snapshot_read(5)
    s.drained()
    s.actions()
    assert s.bound_crossed(6)  # the connection runs the catch-up
    assert s.actions() == [WaitDrained()] and s.holding
    s.message(7, ("msg", 7), 10)
    s.drained()
    assert s.actions() == [ReadBacklog(6, 6)]
    s.backlog_read([("msg", 6)])
    assert sends(s.actions()) == [("msg", 6), ("msg", 7)]


def test_a_backlog_the_history_no_longer_holds_ends_in_a_slow_consumer_resync() -> None:
    s = sub()
    s.actions()
    s.snapshot_read(5)
    s.drained()
    s.actions()
    s.bound_crossed(6)
    s.drained()
    s.actions()
    s.backlog_read(None)
    assert s.actions() == [Resync("slow_consumer")] and s.ended
    assert s.message(7, ("msg", 7), 10)  # taken and dropped: never sent


def test_a_hole_between_the_snapshot_and_what_was_held_is_filled_from_the_history() -> None:
    s = sub()
    s.actions()
    s.message(8, ("msg", 8), 10)  # 6 and 7 went by before the subscription (the bus dropped them)
    s.snapshot_read(5)
    assert s.actions() == [ReadBacklog(6, 8)]


def test_a_resync_ends_it_and_drops_what_was_to_be_done() -> None:
    s = sub()
    s.actions()
    s.snapshot_page(("page", 5))
    s.resync("bus_reset")
    assert s.actions() == [Resync("bus_reset")] and s.ended
    s.resync("gap")
    assert s.actions() == []


def test_a_read_that_ends_after_the_client_left_is_ignored() -> None:
    s = sub(make_cursor(2, 10))
    s.actions()
    s.unsubscribed()
    s.position_read((2, 12))
    s.snapshot_read(12)
    assert s.actions() == [] and s.ended


def test_events_out_of_turn_name_the_state() -> None:
    s = sub()
    with pytest.raises(InvalidEvent, match="subscription is snapshot, expected resuming"):
        s.position_read((1, 1))


class SubscriptionUnderAnyInterleaving(RuleBasedStateMachine):
    """A channel published by a relay (epochs, a bounded history), carried by a lossy bus to a hub that
    repairs gaps from the history, one subscription run by an adapter that does its actions in order, and a
    client that may be slow at any moment. The client's view must stay gap-free and in order, never a
    message twice, or end in a resync; and once everything settles, a subscription
    that did not end is live and has everything."""

    BLOCK = 4  # the backlog's block: a read stops at a block's end

    @initialize(
        top=st.integers(0, 12),
        window=st.integers(1, 10),
        cursor=st.one_of(st.none(), st.just("garbage"), st.tuples(st.integers(0, 3), st.integers(0, 16))),
    )
    def start(self, top: int, window: int, cursor: tuple[int, int] | str | None) -> None:
        self.epoch = 1
        self.epochs = {seq: 1 for seq in range(1, top + 1)}  # who published each message
        self.top = top
        self.window = window
        self.kept_from = max(1, top - window + 1)  # the history holds kept_from..top
        self.transit: deque[int] = deque()  # published, not yet arrived at the node
        self.hub_at: int | None = None  # the newest seq the hub delivered (None: none yet)
        self.sub: Subscription[Payload] = Subscription(CHANNEL)
        self.cursor = cursor if cursor is None or isinstance(cursor, str) else make_cursor(*cursor)
        self.pending: deque[Action[Payload]] = deque()
        self.draining = False  # the adapter waits for the connection to drain
        self.slow = False  # the client reads nothing: a live message does not fit
        self.received: list[tuple[str, object]] = []

    # -- the world

    @rule()
    def publish(self) -> None:
        self.top += 1
        self.epochs[self.top] = self.epoch
        self.kept_from = max(self.kept_from, self.top - self.window + 1)
        self.transit.append(self.top)

    @rule()
    def take_over(self) -> None:
        self.epoch += 1  # a new relay continues the sequence

    @rule(count=st.integers(1, 5), often=st.integers(0, 3))
    def trim_history(self, count: int, often: int) -> None:
        if often == 0:  # rarely: most trimming is the window's
            self.kept_from = min(self.top + 1, self.kept_from + count)

    @precondition(lambda self: self.transit)
    @rule(lose=st.integers(0, 4))
    def arrive(self, lose: int) -> None:
        seq = self.transit.popleft()
        if lose:  # else (one in five): pub/sub dropped it
            self._hub_arrival(seq)

    @rule()
    def check_position(self) -> None:
        """The hub's periodic check: the bus is ahead of what the hub delivered, fill the tail from history."""
        if self.hub_at is not None and self.top > self.hub_at:
            self._repair(self.top)

    @rule(often=st.integers(0, 9))
    def bus_reset(self, often: int) -> None:
        if often == 0:  # rarely: it ends the example
            self._resync("bus_reset")

    @rule(slow=st.booleans())
    def client_speed(self, slow: bool) -> None:
        self.slow = slow

    @precondition(lambda self: self.sub.holding)
    @rule()
    def held_past_the_bound(self) -> None:
        if self.sub.held:
            self.sub.bound_crossed(self.sub.held[-1][0])

    # -- the adapter

    @precondition(lambda self: self.sub.state is State.SUBSCRIBING)
    @rule()
    def confirmed(self) -> None:
        self.sub.subscribed(self.cursor)

    @precondition(lambda self: self.draining)
    @rule()
    def drained(self) -> None:
        self.draining = False
        self.sub.drained(self.hub_at)

    @precondition(lambda self: not self.draining)
    @rule()
    def run_action(self) -> None:
        self.pending.extend(self.sub.actions())
        if self.pending:
            self._run(self.pending.popleft())

    # -- what the client saw

    @invariant()
    def gap_free_in_order_or_resync(self) -> None:
        self._client_has()

    def _client_has(self) -> int | None:
        """The newest seq the client has (None: nothing yet), checking its view on the way."""
        have = None
        resumed_from = None
        if isinstance(self.cursor, str):
            parts = self.cursor.split("-")
            if len(parts) == 2 and all(p.isdigit() for p in parts):
                resumed_from = (int(parts[0]), int(parts[1]))
                have = resumed_from[1]
        snapshot = False
        for i, (kind, value) in enumerate(self.received):
            if kind == "resync":
                assert i == len(self.received) - 1, f"sent after a resync: {self.received}"
            elif kind == "page":
                assert snapshot or not any(k == "msg" for k, _ in self.received[:i]), self.received
                snapshot, have = True, value
            else:
                # Never a message twice: one that went live while the hub's stream was still behind its snapshot
                # keeps its machine until the stream passes what it has (its floor).
                assert have is not None and value == have + 1, f"not the next message: {self.received}"
                if not snapshot:  # a replay: only from the relay the cursor names
                    assert resumed_from is not None
                    epoch, seq = resumed_from
                    assert self.epochs.get(seq if seq else 1) == epoch, f"replayed another stream: {self.received}"
                have = value
        return have

    def teardown(self) -> None:
        if not hasattr(self, "sub"):
            return
        self.slow = False
        while self.transit:
            self._hub_arrival(self.transit.popleft())
        self.check_position()
        if self.sub.state is State.SUBSCRIBING:
            self.sub.subscribed(self.cursor)
        for _ in range(10_000):
            self.pending.extend(self.sub.actions())
            if self.draining:
                self.drained()
            elif self.pending:
                self._run(self.pending.popleft())
            else:
                break
        have = self._client_has()
        if not self.sub.ended:
            assert self.sub.state is State.LIVE
            assert have == self.top, f"not caught up to {self.top}: {self.received}"

    # -- helpers

    def _kept(self, seq: int) -> bool:
        return self.kept_from <= seq <= self.top

    def _hub_arrival(self, seq: int) -> None:
        if self.hub_at is None:
            self.hub_at = seq  # the first message seen: the stream starts here
            self._deliver(seq)
        elif seq <= self.hub_at:
            pass  # a duplicate
        elif seq == self.hub_at + 1:
            self.hub_at = seq
            self._deliver(seq)
        else:
            self._repair(seq - 1)
            if self.hub_at is not None and seq == self.hub_at + 1:
                self.hub_at = seq
                self._deliver(seq)

    def _repair(self, last: int) -> None:
        assert self.hub_at is not None
        for seq in range(self.hub_at + 1, last + 1):
            if not self._kept(seq):
                self._resync("gap")
                self.hub_at = None  # the hub drops the channel's subscribers and its stream
                return
            self.hub_at = seq
            self._deliver(seq)

    def _deliver(self, seq: int) -> None:
        """The hub hands a message to the connection (straight to the socket while live and keeping up)."""
        if self.sub.settled and not self.slow:
            self.received.append(("msg", seq))
        elif not self.sub.message(seq, ("msg", seq), 1):
            if self.slow:
                self.sub.bound_crossed(seq)
            else:
                self.received.append(("msg", seq))

    def _resync(self, reason: str) -> None:
        """The hub resyncs the channel's subscribers: the connection sends it at once."""
        self.sub.resync(reason)
        for action in self.sub.actions():
            self._run(action)

    def _anchor(self) -> None:
        """As `Hub.anchor`: the stream starts at the position the read reflects, 0 for a channel never published
        (a lost first message is then a gap the hub fills, as the node's snapshots anchor at (fence, 0))."""
        if self.hub_at is None:
            self.hub_at = self.top

    def _run(self, action: Action[Payload]) -> None:
        if self.sub.ended and not isinstance(action, Resync):
            return
        if isinstance(action, ReadPosition):
            self._anchor()
            self.sub.position_read((self.epochs[self.top], self.top) if self.top else None)
        elif isinstance(action, ReadReplay):
            entries = [(self.epochs[s], s, ("msg", s)) for s in range(action.first, action.last + 1) if self._kept(s)]
            self.sub.replay_read(action.first, action.last, entries)
        elif isinstance(action, ReadSnapshot):
            self._anchor()
            at = self.top
            self.sub.snapshot_page(("page", at))
            self.sub.snapshot_read(at)
        elif isinstance(action, ReadBacklog):
            end = min(action.last, (action.first - 1) // self.BLOCK * self.BLOCK + self.BLOCK)
            found = [("msg", s) for s in range(action.first, end + 1)]
            self.sub.backlog_read(found if all(self._kept(s) for s in range(action.first, end + 1)) else None)
        elif isinstance(action, Send):
            self.received.append(action.payload)
        elif isinstance(action, WaitDrained):
            self.draining = True
        elif isinstance(action, Resync):
            self.received.append(("resync", action.reason))
        else:
            assert isinstance(action, GoLive)


SubscriptionUnderAnyInterleaving.TestCase.settings = settings(max_examples=200, stateful_step_count=60, deadline=None)
test_subscription_under_any_interleaving = SubscriptionUnderAnyInterleaving.TestCase
