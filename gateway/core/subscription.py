"""One connection's subscription to one channel, from subscribe to live, as a sans-I/O state machine.

The node feeds it events (the client subscribed, a position or history entries were read, a snapshot page
was read, a live message arrived, the connection drained, a bound was crossed, the bus lost the channel) and
asks it for actions (`actions()`: read this, send that, wait for the connection to drain, go live, resync).
It never awaits and never reads a clock: the node does the reads and writes, like python-websockets'
`Protocol` with its asyncio adapter around it. Payloads (frames, snapshot pages) are opaque to it.

What the client receives is gap-free and in order (each message is the one after what it has), or ends in
an explicit resync. The node subscribes in the bus *before* it feeds `subscribed`, so every message published
after the snapshot or replay it reads is also held here; held messages the client already has are skipped.

| state      | event                          | actions                               | next                    |
|------------|--------------------------------|---------------------------------------|-------------------------|
| SUBSCRIBING| subscribed(cursor)             | ReadPosition                          | RESUMING                |
| SUBSCRIBING| subscribed(None or bad cursor) | ReadSnapshot                          | SNAPSHOT                |
| RESUMING   | position_read(at cursor)       | (release)                             | RELEASING               |
| RESUMING   | position_read(behind, reachable)| ReadReplay(cursor, +REPLAY_READ)     | RESUMING                |
| RESUMING   | position_read(none/ahead/far)  | ReadSnapshot                          | SNAPSHOT                |
| RESUMING   | replay_read(contiguous, epoch) | Send x missed, (release: the backlog has the rest) | RELEASING  |
| RESUMING   | replay_read(otherwise)         | ReadSnapshot                          | SNAPSHOT                |
| SNAPSHOT   | snapshot_page(page)            | Send(page)                            | SNAPSHOT                |
| SNAPSHOT   | snapshot_read(seq)             | (release)                             | RELEASING               |
| RELEASING  | (release), dropped past sent, or a hole | ReadBacklog(sent + 1, dropped) | RELEASING               |
| RELEASING  | (release), otherwise           | Send x held newer than sent, WaitDrained | RELEASING            |
| RELEASING  | backlog_read(frames)           | Send x frames, (release)              | RELEASING               |
| RELEASING  | backlog_read(None)             | Resync("slow_consumer")               | ENDED                   |
| RELEASING  | drained(at), nothing new held  | GoLive                                | LIVE, floor: see below   |
| RELEASING  | drained(), more held           | (release)                             | RELEASING               |
| not LIVE   | message(seq, payload)          | (held)                                | same                    |
| not LIVE   | bound_crossed(seq)             | (held ones dropped: history has them) | same                    |
| LIVE       | message(seq <= floor)          | (dropped: the client has it)          | LIVE                    |
| LIVE       | bound_crossed(seq): a lag      | WaitDrained                           | RELEASING, sent=seq - 1 |
| any        | resync(reason)                 | Resync(reason)                        | ENDED                   |
| any        | unsubscribed()                 |                                       | ENDED                   |
| ENDED      | anything                       | (ignored: a read in flight ended late) | ENDED                  |

In LIVE the hub writes messages straight to the socket without consulting the machine (the hot path costs
nothing more than it did); the connection feeds it again only when a live message does not fit (`bound_crossed`).
So a connection keeps a machine only for its channels that are not live (`Subscription.following` makes one for
a live channel that lags): thousands of idle connections following a few channels each keep none. One that went
live while the node's stream of the channel was still behind what the client has (the stream being repaired from
the history, or its bus link slower than the snapshot's read) keeps its machine a little longer, with a `floor`:
the stream's next messages up to it are the client's already and are dropped, not sent twice; the first one past
it settles the machine, and the connection drops it.
A channel's losses on the bus are the hub's to mend: it feeds messages in order, repairing a gap from the
history first, or resyncs every subscriber of the channel (`resync("gap")`, `resync("bus_reset")`).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from .protocol import parse_cursor

log = logging.getLogger(__name__)

MAX_REPLAY = 5_000  # past this many missed messages a snapshot is cheaper than the replay
# A resume reads at most this many messages with the cursor's own; the rest come from the history as the client
# drains, a block at a time, as a slow consumer's do (shared with every client catching up through them).
REPLAY_READ = 32

P = TypeVar("P")  # a payload: the node's frame of a message, or a snapshot page


class State(enum.IntEnum):
    SUBSCRIBING = 0  # the bus subscription is being confirmed: live messages are held from now on
    RESUMING = 1  # reading the channel's position and what the client missed since its cursor
    SNAPSHOT = 2  # the snapshot is being read and sent
    RELEASING = 3  # the client has everything up to `sent`: held messages go out, the history fills the rest
    LIVE = 4  # messages go straight to the connection
    ENDED = 5  # resynced or unsubscribed: nothing more for this channel


HOLDING = (State.SUBSCRIBING, State.RESUMING, State.SNAPSHOT, State.RELEASING)


class InvalidEvent(RuntimeError):
    """An event the current state does not take (a bug in the adapter)."""


@dataclass(frozen=True, slots=True)
class ReadPosition:
    """Read the channel's (epoch, seq) now; answer `position_read`."""


@dataclass(frozen=True, slots=True)
class ReadReplay:
    """Read history entries first..last with their epochs; answer `replay_read`."""

    first: int
    last: int


@dataclass(frozen=True, slots=True)
class ReadSnapshot:
    """Read the channel's state and send it as `snapshot_page`s, then answer `snapshot_read(seq)`."""


@dataclass(frozen=True, slots=True)
class ReadBacklog:
    """Read messages from `first` (up to `last`, fewer is fine) from the history, framed for this connection;
    answer `backlog_read`."""

    first: int
    last: int


@dataclass(frozen=True, slots=True)
class Send(Generic[P]):
    """Push this payload to the connection (forced: its sender paces by draining, not by the live bound)."""

    payload: P


@dataclass(frozen=True, slots=True)
class WaitDrained:
    """Wait until the connection's pending output is under a quarter of its bound; answer `drained`."""


@dataclass(frozen=True, slots=True)
class GoLive:
    """Live from here: the hub may write the channel's messages straight to the socket again."""


@dataclass(frozen=True, slots=True)
class Resync:
    """Tell the client to reload the channel; it is unsubscribed until it subscribes again."""

    reason: str


Action = ReadPosition | ReadReplay | ReadSnapshot | ReadBacklog | Send[P] | WaitDrained | GoLive | Resync


class Subscription(Generic[P]):
    """One connection's subscription to one channel, subscribe to live (see the module's table)."""

    __slots__ = ("channel", "_state", "cursor", "sent", "skipped", "floor", "held", "held_bytes", "_actions")

    def __init__(self, channel: str, state: State = State.SUBSCRIBING) -> None:
        self.channel = channel
        self._state = state
        self.cursor: tuple[int, int] | None = None  # the client's, while resuming
        self.sent = -1  # the newest seq the client has (or will have, once the pushed payloads are written)
        self.skipped = 0  # the newest seq dropped from `held` to stay within the bound: the history has it
        self.floor = -1  # live, and the node's stream had not reached what the client has: drop up to here
        self.held: list[tuple[int, P]] = []  # live messages arrived while not live, oldest first
        self.held_bytes = 0
        self._actions: list[Action[P]] = []

    @classmethod
    def following(cls, channel: str) -> Subscription[P]:
        """A channel already live (the connection keeps no machine for a channel while it keeps up: it makes
        one again when the channel lags)."""
        return cls(channel, State.LIVE)

    @property
    def state(self) -> State:
        return self._state

    @state.setter
    def state(self, state: State) -> None:
        log.debug("%s: %s -> %s", self.channel, self._state.name, state.name)
        self._state = state

    @property
    def ended(self) -> bool:
        return self._state is State.ENDED

    @property
    def settled(self) -> bool:
        """Live with nothing left to drop: the connection need not keep this machine."""
        return self._state is State.LIVE and self.floor < 0

    @property
    def holding(self) -> bool:
        """Live messages are held here (not written straight to the socket)."""
        return self._state in HOLDING

    def actions(self) -> list[Action[P]]:
        """What to do now, in order (and forget it: each action is handed out once)."""
        actions, self._actions = self._actions, []
        return actions

    # -- events

    def subscribed(self, cursor: str | None) -> None:
        """The bus confirmed the subscription: resume from the client's cursor, or send a snapshot."""
        if not self._expect(State.SUBSCRIBING):
            return
        self.cursor = parse_cursor(cursor) if cursor is not None else None
        if self.cursor is None:
            self._snapshot()
        else:
            self.state = State.RESUMING
            self._actions.append(ReadPosition())

    def position_read(self, position: tuple[int, int] | None) -> None:
        """The channel's (epoch, seq) now; None when the bus knows nothing of it."""
        if not self._expect(State.RESUMING):
            return
        assert self.cursor is not None
        seq = self.cursor[1]
        if position is None:
            self._snapshot()
        elif position == self.cursor:
            self._release_from(seq)  # nothing missed
        elif position[1] <= seq or position[1] - seq > MAX_REPLAY:
            self._snapshot()
        else:
            # From seq 0 (the snapshot came before the channel's first message) everything from 1 on was missed;
            # else the cursor's own message is read too, to check it is the one the client has. Past the first
            # read, the history has what was missed up to the position: it follows from the backlog.
            first = max(seq, 1)
            self.skipped = max(self.skipped, position[1])
            self._actions.append(ReadReplay(first, min(position[1], first + REPLAY_READ - 1)))

    def replay_read(self, first: int, last: int, entries: Sequence[tuple[int, int, P]]) -> None:
        """History entries (epoch, seq, payload) read for `ReadReplay(first, last)`."""
        if not self._expect(State.RESUMING):
            return
        assert self.cursor is not None
        epoch, seq = self.cursor
        contiguous = len(entries) == last - first + 1 and all(e[1] == first + i for i, e in enumerate(entries))
        # Replayed only if the relay that published them is the one the cursor names: then what follows the
        # cursor's message is exactly what the client has not seen.
        if not contiguous or entries[0][0] != epoch:
            self._snapshot()
            return
        for _, _, payload in entries if seq == 0 else entries[1:]:
            self._actions.append(Send(payload))
        self._release_from(last)

    def snapshot_page(self, page: P) -> None:
        """A page of the snapshot, read: send it."""
        if not self._expect(State.SNAPSHOT):
            return
        self._actions.append(Send(page))

    def snapshot_read(self, seq: int) -> None:
        """The whole snapshot is out; it reflects the channel up to `seq`."""
        if not self._expect(State.SNAPSHOT):
            return
        self._release_from(seq)

    def message(self, seq: int, payload: P, size: int) -> bool:
        """A live message the hub did not write straight to the socket. True: taken here (held, or dropped when
        ended); False: live, the connection sends it now."""
        if self._state in HOLDING:
            self.held.append((seq, payload))
            self.held_bytes += size
            return True
        if self.floor >= 0 and self._state is State.LIVE:
            if seq <= self.floor:
                return True  # the snapshot or replay gave it to the client already
            self.floor = -1
        return self._state is State.ENDED

    def bound_crossed(self, seq: int) -> bool:
        """Message `seq` did not fit within the connection's bound. Held messages are dropped (the history has
        them); a live channel lags and catches up from the history once drained. True: a catch-up starts (the
        adapter runs `actions()` from now on)."""
        if self._state in HOLDING:
            self.skipped = max(self.skipped, seq)
            self.held, self.held_bytes = [], 0
            return False
        if self._state is State.LIVE:
            self.state = State.RELEASING
            self.sent, self.skipped, self.floor = seq - 1, seq, -1
            self.held, self.held_bytes = [], 0
            self._actions.append(WaitDrained())
            return True
        return False

    def backlog_read(self, payloads: Sequence[P] | None) -> None:
        """Messages from `ReadBacklog.first` on, in order (perhaps fewer than asked); None: the history no
        longer holds them."""
        if not self._expect(State.RELEASING):
            return
        if payloads is None:
            self._end(Resync("slow_consumer"))
            return
        for payload in payloads:
            self._actions.append(Send(payload))
        self.sent += len(payloads)
        self._release()

    def drained(self, delivered: int | None = None) -> None:
        """The connection's pending output fell under a quarter of its bound. `delivered`: the newest seq the
        node's stream of the channel has delivered (None: not known, taken as caught up)."""
        if self._state is not State.RELEASING:
            return
        if not self.held and self.skipped <= self.sent:
            self.state = State.LIVE
            if delivered is not None and delivered < self.sent:
                self.floor = self.sent  # the stream will deliver what the client has: drop it, once
            self._actions.append(GoLive())
            return
        self._release()

    def resync(self, reason: str) -> None:
        """The client must reload the channel (the hub's gap the history cannot fill, the bus lost it)."""
        if self._state is not State.ENDED:
            self._end(Resync(reason))

    def unsubscribed(self) -> None:
        """The client left the channel (or the connection closed): nothing more."""
        self.state = State.ENDED
        self._actions, self.held, self.held_bytes = [], [], 0

    # -- internals

    def _expect(self, *states: State) -> bool:
        """False: ended, the event comes too late (a read in flight when the client left) and is ignored."""
        if self._state in states:
            return True
        if self._state is State.ENDED:
            return False
        expected = " or ".join(s.name.lower() for s in states)
        raise InvalidEvent(f"{self.channel}: subscription is {self._state.name.lower()}, expected {expected}")

    def _snapshot(self) -> None:
        self.state = State.SNAPSHOT
        self._actions.append(ReadSnapshot())

    def _release_from(self, seq: int) -> None:
        self.state = State.RELEASING
        self.sent = seq
        self._release()

    def _release(self) -> None:
        """Send what the client misses after `sent`: dropped messages from the history first, then held ones."""
        if self.skipped > self.sent:
            self._actions.append(ReadBacklog(self.sent + 1, self.skipped))
            return
        held, self.held, self.held_bytes = self.held, [], 0
        for seq, payload in held:
            if seq <= self.sent:
                continue  # the snapshot or replay covered it
            if seq != self.sent + 1:
                # A hole between what the client has and what was held (a message the bus delivered before
                # the read it raced): never send past it; the history fills it and what was held after it.
                self.skipped = max(self.skipped, held[-1][0])
                self._actions.append(ReadBacklog(self.sent + 1, self.skipped))
                return
            self._actions.append(Send(payload))
            self.sent = seq
        self._actions.append(WaitDrained())

    def _end(self, resync: Resync) -> None:
        self.state = State.ENDED
        self._actions, self.held, self.held_bytes = [resync], [], 0
