"""A Redis restart under load, every interleaving: the relay (its kept cycle, the refill), the bus, one node (the
real Hub and Subscription machines) and two clients (the real follower Position), stepped one action at a time
in whatever order hypothesis picks. Afterwards, once the last change has gone out and everything has been
delivered, every client that holds a channel holds the database's state: none is left stale without a gap.

The model is deliberately small: one jobs channel (versioned deltas, a snapshot read from the database after the
position) and one team channel (absolute state, a snapshot read from the bus's stored state, or from the database
when the bus lost it); a change bumps a channel's version in the database, and a message carries the version the
relay had read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from gateway.core import envelope
from gateway.core.follower import Position, Verdict
from gateway.core.subscription import (
    GoLive,
    ReadBacklog,
    ReadPosition,
    ReadReplay,
    ReadSnapshot,
    Resync,
    Send,
    Subscription,
    WaitDrained,
)
from gateway.core.wsframe import Frame
from gateway.hub.held import HeldChannels
from gateway.hub.hub import Hub

JOBS, TEAM = "trajectory:1", "team:1"
CHANNELS = (JOBS, TEAM)
EPOCH = 3
READS = (ReadPosition, ReadReplay, ReadSnapshot, ReadBacklog)
LIMIT = 1 << 20  # a connection's bound for held frames: never reached here


def frame(**fields: Any) -> Frame:
    return Frame(msgspec.msgpack.encode(fields), text=False)


@dataclass
class Bus:
    """The model's Redis: positions, history, the team channel's stored state, the fence and the relay cursor."""

    up: bool = True
    fence: int | None = EPOCH
    cursor: bool = True
    position: dict[str, tuple[int, int]] = field(default_factory=dict)
    history: dict[str, dict[int, int]] = field(default_factory=lambda: {c: {} for c in CHANNELS})
    state: dict[str, tuple[int, int]] = field(default_factory=dict)  # team: (seq, version)

    def restart(self) -> None:
        self.fence, self.cursor = None, False
        self.position, self.state = {}, {}
        self.history = {c: {} for c in CHANNELS}


@dataclass
class Conn:
    """A node's connection as the hub sees it, and its client's side."""

    name: int
    fast: None = None
    format: str = "msgpack"
    wire_kind: int = 1
    held: HeldChannels = field(default_factory=HeldChannels)
    wire: list[tuple[str, Any]] = field(default_factory=list)  # node -> client, in order
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # client -> node: subscribes, cursors
    positions: dict[str, Position] = field(default_factory=lambda: {c: Position() for c in CHANNELS})
    holds: dict[str, int | None] = field(default_factory=lambda: dict.fromkeys(CHANNELS))

    def __hash__(self) -> int:
        return self.name

    def deliver(self, channel: str, seq: int, data: Frame) -> None:
        if not self.held.hold(channel, seq, data, LIMIT):
            self.wire.append((channel, data))

    def resync(self, channel: str, reason: str) -> None:
        """As gateway.hub.connection.Connection.resync: its subscription ends, the client is told."""
        self.held.resync(channel, reason)
        self.held.end(channel)
        self.wire.append((channel, "resync"))


@dataclass
class Runner:
    conn: Conn
    sub: Subscription[Frame]
    cursor: str | None = None  # the client's, as it subscribed
    attempt: int = 1
    pending: list[Any] = field(default_factory=list)
    snapshot: tuple[int, int, bool] | None = None  # (epoch, seq, from the bus's state) read, rows not yet


class RestartUnderLoad(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.bus = Bus()
        self.db = dict.fromkeys(CHANNELS, 1)
        # The relay: what it read, its sequences, the cycle it keeps until it goes out.
        self.read = dict.fromkeys(CHANNELS, 1)
        self.seqs = dict.fromkeys(CHANNELS, 5)
        self.kept: list[tuple[str, int, int, bool]] | None = None  # (channel, seq, version, whole team state)
        self.on_bus = True  # the relay checks the bus's cursor (it read or wrote one)
        for c in CHANNELS:  # as it stood before: seq 5 holds version 1
            self.bus.position[c] = (EPOCH, 5)
            self.bus.history[c][5] = 1
        self.bus.state[TEAM] = (5, 1)
        self.link_up = True
        self.inbox: list[tuple[str, bytes]] = []
        self.repairs: list[tuple[str, int, int]] = []
        self.restored = False
        # Snapshots built for a channel at a position, served again there for a while (hub.snapshots.REUSE).
        self.built: dict[str, tuple[tuple[int, int], int]] = {}
        self.hub = Hub(on_gap=lambda c, first, last: self.repairs.append((c, first, last)))
        self.conns = [Conn(0), Conn(1)]
        self.runners: list[Runner] = []
        for conn in self.conns:
            conn.requests += [(c, None) for c in CHANNELS]

    # -- the relay and the bus

    def publish(self, channel: str, seq: int, version: int, whole: bool) -> None:
        bus = self.bus
        at = bus.position.get(channel)
        if at is not None and at[0] == EPOCH and at[1] >= seq:
            return  # sent already (a cycle sent again)
        bus.position[channel] = (EPOCH, seq)
        bus.history[channel][seq] = version
        if channel == TEAM:
            bus.state[channel] = (seq, version)
        if self.link_up:
            payload = msgspec.msgpack.encode({"seq": seq, "v": version})
            json = msgspec.json.encode({"seq": seq, "v": version})
            self.inbox.append((channel, envelope.pack(EPOCH, seq, json, payload)))

    @rule(channel=st.sampled_from(CHANNELS))
    def change(self, channel: str) -> None:
        self.db[channel] += 1

    @rule(reply_lost=st.booleans())
    def relay_cycle(self, reply_lost: bool = False) -> None:
        """One try of the relay's cycle; `reply_lost`: the bus took it, the relay never heard (it keeps it)."""
        if self.kept is None:
            cycle = []
            for c in CHANNELS:
                if self.read[c] < self.db[c]:
                    self.read[c] = self.db[c]
                    self.seqs[c] += 1
                    cycle.append((c, self.seqs[c], self.read[c], False))
            if not cycle:
                return
            self.kept = cycle
        if not self.bus.up:
            return  # kept, tried again
        if self.on_bus and not self.bus.cursor:
            # The bus lost what this relay published: the fence again, then every team's whole state with the
            # kept messages (the next cycle's try sends them).
            self.bus.fence = EPOCH
            self.on_bus = False
            self.seqs[TEAM] += 1
            self.kept.append((TEAM, self.seqs[TEAM], self.read[TEAM], True))
            return
        for c, seq, version, whole in self.kept:
            self.publish(c, seq, version, whole)
        self.bus.cursor = True
        if not reply_lost:
            self.on_bus = True
            self.kept = None

    @rule()
    def redis_restart(self) -> None:
        self.bus.restart()
        self.bus.up = False
        self.link_up = False
        self.inbox.clear()  # what was on its way to the node is lost with the connection

    @rule()
    def redis_up(self) -> None:
        self.bus.up = True

    @rule()
    def node_reconnects(self) -> None:
        if self.bus.up and not self.link_up:
            self.link_up = True
            self.restored = True

    # -- the node

    @rule()
    def node_hears(self) -> None:
        if self.inbox:
            channel, data = self.inbox.pop(0)
            self.hub.on_message(channel, data)

    @rule()
    def node_repairs(self) -> None:
        if self.repairs and self.bus.up:
            channel, first, last = self.repairs.pop(0)
            history = self.bus.history[channel]
            found = None
            if all(s in history for s in range(first, last + 1)):
                found = [
                    (EPOCH, s, msgspec.msgpack.encode({"seq": s, "v": history[s]})) for s in range(first, last + 1)
                ]
            self.hub.repaired(channel, found)

    @rule()
    def node_checks_positions(self) -> None:
        """Once subscribed again after the reconnect (Repairs.check_once, at once)."""
        if not self.restored or not self.link_up:
            return
        self.restored = False
        for channel in list(self.hub.subscribers):
            at = self.bus.position.get(channel)
            if at is None:
                if self.hub.delivered_seq(channel) > 0:
                    self.hub.resync_channel(channel, "bus_reset")
            elif self.hub.behind(channel, *at):
                self.hub.check_position(channel, *at)

    def can_subscribe(self) -> list[Conn]:
        """Connections with a subscribe waiting and none under way (a connection's are handled in order)."""
        return [c for c in self.conns if c.requests and not any(r.conn is c for r in self.runners)]

    @rule(data=st.data())
    def node_subscribes(self, data: st.DataObject) -> None:
        ready = self.can_subscribe()
        if ready:
            self.subscribe(data.draw(st.sampled_from(ready)))

    def subscribe(self, conn: Conn) -> None:
        channel, cursor = conn.requests.pop(0)
        self.open(conn, channel, cursor, 1)

    def open(self, conn: Conn, channel: str, cursor: str | None, attempt: int) -> None:
        sub = conn.held.open(channel)
        self.hub.add(conn, channel)  # type: ignore[arg-type]
        sub.subscribed(cursor)
        self.runners.append(Runner(conn, sub, cursor, attempt))

    @rule(data=st.data())
    def read_fails(self, data: st.DataObject) -> None:
        """A subscribe's read fails (Redis away, or a pooled connection that died with it): as Node.subscribe,
        it is left and tried once more, then the client is told `unavailable` (it tries again with its cursor)."""
        if not self.runners:
            return
        r = data.draw(st.sampled_from(self.runners))
        if r.sub.ended:
            return
        self.runners.remove(r)
        conn, channel = r.conn, r.sub.channel
        conn.held.end(channel)
        self.hub.remove(conn, channel)  # type: ignore[arg-type]
        if r.attempt == 1:
            self.open(conn, channel, r.cursor, 2)
        else:
            conn.wire.append((channel, "unavailable"))

    @rule(data=st.data())
    def runner_step(self, data: st.DataObject) -> None:
        if self.runners:
            self.step(data.draw(st.sampled_from(self.runners)))

    def step(self, r: Runner) -> None:
        """The runner's next action (gateway.hub.subscription_runner), or a snapshot's next read."""
        r.pending += r.sub.actions()
        reads = r.snapshot is not None or r.pending and isinstance(r.pending[0], READS)
        if reads and not self.bus.up:
            return  # the read waits for Redis
        if r.snapshot is not None:
            self.snapshot_rows(r)
            return
        if not r.pending:
            self.runners.remove(r)
            return
        action = r.pending.pop(0)
        sub, conn, channel = r.sub, r.conn, r.sub.channel
        if sub.ended and not isinstance(action, Resync):
            self.runners.remove(r)
            return
        if isinstance(action, Send):
            conn.wire.append((channel, action.payload))
        elif isinstance(action, WaitDrained):
            sub.drained()
        elif isinstance(action, GoLive):
            conn.held.release(sub)
        elif isinstance(action, Resync):
            conn.resync(channel, action.reason)
            self.hub.remove(conn, channel)  # type: ignore[arg-type]
        elif isinstance(action, ReadSnapshot):
            self.snapshot_position(r)
        elif isinstance(action, ReadBacklog):
            history = self.bus.history[channel]
            seqs = range(action.first, action.last + 1)
            sub.backlog_read([frame(seq=s, v=history[s]) for s in seqs] if all(s in history for s in seqs) else None)
        elif isinstance(action, ReadPosition):
            at = self.bus.position.get(channel)
            if at is not None:
                self.hub.anchor(channel, *at)
            sub.position_read(at)
        elif isinstance(action, ReadReplay):
            history = self.bus.history[channel]
            found = [s for s in range(action.first, action.last + 1) if s in history]
            sub.replay_read(action.first, action.last, [(EPOCH, s, frame(seq=s, v=history[s])) for s in found])

    @rule()
    def a_second_passes(self) -> None:
        self.built.clear()

    def snapshot_position(self, r: Runner) -> None:
        """A snapshot's first read: the jobs channel's position, or the team channel's stored state."""
        channel, bus = r.sub.channel, self.bus
        if channel == TEAM and TEAM in bus.state:
            seq, _ = bus.state[TEAM]
            r.snapshot = (EPOCH, seq, True)
        else:
            at = bus.position.get(channel) if channel == JOBS else None
            epoch, seq = at or (bus.fence or 0, 0)
            r.snapshot = (epoch, seq, False)
        epoch, seq, _ = r.snapshot
        self.hub.anchor(channel, epoch, seq)

    def snapshot_rows(self, r: Runner) -> None:
        """Its second: the rows (or the team's state) from the database, or the state as stored."""
        assert r.snapshot is not None
        epoch, seq, stored = r.snapshot
        channel = r.sub.channel
        built = self.built.get(channel)
        if built is not None and built[0] == (epoch, seq) and (channel == JOBS or stored):
            version = built[1]
        else:
            version = self.bus.state[TEAM][1] if stored and TEAM in self.bus.state else self.db[channel]
            if channel == JOBS or stored:
                self.built[channel] = ((epoch, seq), version)
        r.snapshot = None
        r.sub.snapshot_page(frame(page=0, epoch=epoch, seq=seq, v=version))
        r.sub.snapshot_read(seq)

    # -- the clients

    @rule(data=st.data())
    def client_reads(self, data: st.DataObject) -> None:
        busy = [c for c in self.conns if c.wire]
        if busy:
            self.client_read(data.draw(st.sampled_from(busy)))

    def client_read(self, conn: Conn) -> None:
        channel, what = conn.wire.pop(0)
        position = conn.positions[channel]
        if what == "resync":
            position.resync()
            conn.holds[channel] = None
            conn.requests.append((channel, None))
            return
        if what == "unavailable":
            conn.requests.append((channel, position.resume_cursor))
            return
        message = msgspec.msgpack.decode(what.data)
        if "page" in message:
            position.snapshot(message["seq"], f"{message['epoch']}:{message['seq']}", 0, True)
            conn.holds[channel] = message["v"]
            return
        if not position.ready:
            return
        verdict = position.message(message["seq"], f"{EPOCH}:{message['seq']}")
        if verdict is Verdict.APPLY:
            held = conn.holds[channel] or 0
            conn.holds[channel] = max(held, message["v"]) if channel == JOBS else message["v"]
        elif verdict is Verdict.GAP:
            position.reload()
            conn.requests.append((channel, None))

    # -- afterwards

    def settle(self) -> None:
        """Redis up, the node subscribed again, one last change on every channel out, everything delivered."""
        self.redis_up()
        self.node_reconnects()
        self.node_checks_positions()
        for c in CHANNELS:
            self.change(c)
        for _ in range(3):
            self.relay_cycle()
        for _ in range(10_000):
            if self.inbox:
                self.node_hears()
            elif self.repairs:
                self.node_repairs()
            elif self.runners:
                self.step(self.runners[0])
            elif self.can_subscribe():
                self.subscribe(self.can_subscribe()[0])
            elif any(c.wire for c in self.conns):
                self.client_read(next(c for c in self.conns if c.wire))
            else:
                return
        raise AssertionError("never settled")

    def teardown(self) -> None:
        self.settle()
        for conn in self.conns:
            for channel in CHANNELS:
                assert conn.positions[channel].ready, (conn.name, channel)
                assert conn.holds[channel] == self.db[channel], (
                    f"client {conn.name} holds {channel} at version {conn.holds[channel]}, the database at "
                    f"{self.db[channel]} (seq {conn.positions[channel].seq}, bus {self.bus.position.get(channel)})"
                )


TestRestartUnderLoad = RestartUnderLoad.TestCase
TestRestartUnderLoad.settings = settings(
    max_examples=150, stateful_step_count=50, deadline=None, suppress_health_check=list(HealthCheck)
)
