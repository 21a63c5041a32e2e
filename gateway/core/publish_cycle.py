"""One relay cycle's publish, as a sans-I/O machine: what to read, publish and record, and how to recover.

The relay (gateway.relay.cycle) starts a cycle with where its outbox read reached (`start`), then performs the
action the machine answers and feeds back what it gave (`feed`), until `Done`: read the sequences of channels new
to this epoch, publish the cycle's messages with the outbox cursor they reach, wait and try again while the bus
is away, raise the fence again and send every team's whole state when the bus lost what this relay published.
It never awaits and never reads a clock (`now` is passed in); the batcher (gateway.core.batching) makes the
messages. Retrying a read, cutting a call off at the relay's patience and telling a refusal from a lost link are
the relay's: the machine sees a read's answer, or that a publish failed. The actions and events are typed
(gateway.core.cycle_actions).

A cycle's messages are taken from the batcher once and sent as they are until they go out: a retry sends the
same messages (the bus skips what already went out), so each channel's sequence stays contiguous.

| step         | event                       | action                                         | next         |
|--------------|-----------------------------|------------------------------------------------|--------------|
| IDLE         | start(), waves finished     | ReadMarkers(markers)                           | MARKERS      |
| MARKERS      | MarkersRead(published)      | (finishes already published by anyone: dropped)|              |
| IDLE/MARKERS | extras due                  | CollectExtras                                  | EXTRAS       |
| ...          | channels new to the epoch   | ReadSeqs(channels)                             | SEQS         |
| ...          | submission rows changed     | SaveRows(rows), then the same as below         | ROWS         |
| ...          | nothing to send             | RecordClosed(waves) / Announce(change) / Done  | RECORDING... |
| ...          | otherwise                   | ProveLock(retry=False)                         | PROVING      |
| PROVING      | LockProved, bus behind      | RaiseFence                                     | REFILLING    |
| PROVING      | LockProved                  | Publish(publications, cursor)                  | PUBLISHING   |
| REFILLING    | FenceRaised(now)            | (every team's state added) Publish             | PUBLISHING   |
| REFILLING    | FenceRaised(now), rows      | SaveRows(rows), then Saved: Publish            | REFILL_ROWS  |
| REFILLING    | Failed                      | Wait(delay)                                    | WAITING      |
| PUBLISHING   | Published                   | RecordClosed(waves) / Announce / Done          | RECORDING... |
| PUBLISHING   | Behind, Failed              | Wait(delay): 50 ms, doubling up to 2 s         | WAITING      |
| WAITING      | Waited                      | ProveLock(retry=True)                          | REPROVING    |
| REPROVING    | LockProved                  | CheckBus                                       | CHECKING     |
| CHECKING     | BusChecked(behind), Failed  | RaiseFence (behind) / Publish                  | as PROVING   |
| RECORDING    | Recorded                    | Announce(change) / Done                        | ANNOUNCING   |
| ANNOUNCING   | Announced                   | Announce(change) / Done                        | IDLE         |
| any          | fenced() or abandon()       |                                                | ENDED        |

A newer relay's fence (`fenced()`) or a cycle cut short (`abandon()`: the relay's lock lost, its patience out)
ends the machine: messages taken from the batcher and never sent would leave a hole in their channels, so the
epoch cannot go on, and a successor takes over with an epoch of its own.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from . import channels
from .aggregate import MembershipsChanged, OwnershipsChanged
from .batching import Batcher
from .cycle_actions import (
    CHECK_BUS,
    COLLECT_EXTRAS,
    DONE,
    FIRST_PROOF,
    RAISE_FENCE,
    RETRY_PROOF,
    Action,
    Announce,
    Announced,
    Behind,
    BusChecked,
    Event,
    Extra,
    ExtrasCollected,
    Failed,
    FenceRaised,
    LockProved,
    MarkersRead,
    Publish,
    Published,
    ReadMarkers,
    ReadSeqs,
    RecordClosed,
    Recorded,
    Saved,
    SaveRows,
    SeqsRead,
    Wait,
    Waited,
)
from .finish import Finish
from .publication import Publication

BUS_CHECK_EVERY = 1.0  # seconds between checks that the bus still holds what this relay published
FIRST_DELAY = 0.05  # seconds before a failed publish is tried again; doubled at each try, up to MAX_DELAY
MAX_DELAY = 2.0


class Step(enum.IntEnum):
    IDLE = 0  # between cycles
    MARKERS = 1  # reading which finishes some relay already published
    EXTRAS = 2  # collecting presence and cluster figures
    SEQS = 3  # reading the last sequences of channels new to this epoch
    ROWS = 4  # saving submission rows before the messages that carry them
    PROVING = 5  # proving the partition's lock before the first try
    REFILLING = 6  # raising the fence again on a bus that lost what this relay published
    REFILL_ROWS = 7  # saving the rows of every team's whole state
    PUBLISHING = 8  # the cycle's messages and cursor on their way
    WAITING = 9  # backing off before the next try
    REPROVING = 10  # proving the lock again before the next try
    CHECKING = 11  # asking the bus whether it lost what this relay published
    RECORDING = 12  # the published finishes' waves closed in the database
    ANNOUNCING = 13  # membership and ownership changes sent to every node
    ENDED = 14  # fenced out or cut short: nothing more in this epoch


# The steps by their names: a member read through its enum class costs 80 ns on Python 3.11, and every cycle
# reads several.
(
    IDLE,
    MARKERS,
    EXTRAS,
    SEQS,
    ROWS,
    PROVING,
    REFILLING,
    REFILL_ROWS,
    PUBLISHING,
    WAITING,
    REPROVING,
    CHECKING,
    RECORDING,
    ANNOUNCING,
    ENDED,
) = Step


class InvalidEvent(RuntimeError):
    """An event the current step does not take (a bug in the relay)."""


class PublishCycle:
    """One partition's publish cycles in one relay epoch (see the module's table)."""

    def __init__(self, core: Batcher, marker: Callable[[int, int], str]) -> None:
        self.core = core
        self.marker = marker  # the bus's name of a wave's once-only finish marker
        self.behind = False  # the bus lost what this relay published: send every team's whole state again
        self._step = IDLE
        self._bus_checked_at = 0.0
        self._reset()

    def _reset(self) -> None:
        self._now = 0.0
        self._wall = 0.0
        self._cursor: str | None = None
        self._extras_due = False
        self._finishes: list[Finish] = []
        self._markers: dict[tuple[int, int], str] = {}
        self._extras: list[Extra] = []
        self._publications: list[Publication] = []
        self._delay = FIRST_DELAY
        self._announcements: list[MembershipsChanged | OwnershipsChanged] = []

    @property
    def step(self) -> Step:
        return self._step

    @property
    def ended(self) -> bool:
        return self._step is ENDED

    def start(self, now: float, wall: float, cursor: str | None, extras_due: bool = False) -> Action:
        """A cycle at `now` (monotonic; `wall`: the Unix clock, for the estimates of time left), publishing up
        to the outbox `cursor` (None: nothing new read); `extras_due`: presence and cluster figures to collect."""
        if self._step is not IDLE:
            raise InvalidEvent(f"publish cycle is {self._step.name.lower()}, expected idle")
        self._now, self._wall, self._cursor, self._extras_due = now, wall, cursor, extras_due
        finishes = self.core.take_finishes(now)
        if finishes:
            marker = self.marker
            self._finishes = finishes
            self._markers = {(f.trajectory_id, f.wave): marker(f.trajectory_id, f.wave) for f in finishes}
            self._step = MARKERS
            return ReadMarkers(list(self._markers.values()))
        return self._after_markers()

    def feed(self, event: Event) -> Action:
        """What performing the last action gave; answers the next action."""
        step = self._step
        if step is PUBLISHING:
            if isinstance(event, Published):
                return self._after_publish()
            if isinstance(event, Behind):
                self.behind = True
                return self._wait()
            if isinstance(event, Failed):
                return self._wait()
        elif step is MARKERS and isinstance(event, MarkersRead):
            # A predecessor may have published a finish before it could record it: never twice.
            published, markers = event.published, self._markers
            self._finishes = [f for f in self._finishes if markers[(f.trajectory_id, f.wave)] not in published]
            return self._after_markers()
        elif step is EXTRAS and isinstance(event, ExtrasCollected):
            self._extras = event.extras
            return self._after_extras()
        elif step is SEQS and isinstance(event, SeqsRead):
            self.core.set_seqs(event.seqs)
            return self._compose()
        elif step is ROWS and isinstance(event, Saved):
            return self._after_rows()
        elif step is PROVING and isinstance(event, LockProved):
            return self._attempt()
        elif step is REFILLING:
            if isinstance(event, FenceRaised):
                return self._refill(event.now)
            if isinstance(event, Failed):
                return self._wait()
        elif step is REFILL_ROWS and isinstance(event, Saved):
            return self._publish()
        elif step is WAITING and isinstance(event, Waited):
            self._delay = min(self._delay * 2, MAX_DELAY)
            self._step = REPROVING
            return RETRY_PROOF
        elif step is REPROVING and isinstance(event, LockProved):
            self._step = CHECKING
            return CHECK_BUS
        elif step is CHECKING:
            if isinstance(event, BusChecked):
                self.behind = self.behind or event.behind
                return self._attempt()
            if isinstance(event, Failed):
                return self._attempt()  # the next try finds out
        elif step is RECORDING and isinstance(event, Recorded):
            return self._announce_changes()
        elif step is ANNOUNCING and isinstance(event, Announced):
            return self._announce()
        raise InvalidEvent(f"publish cycle is {step.name.lower()}: it does not take {type(event).__name__}")

    def fenced(self) -> None:
        """A newer relay has taken the partition over: this epoch publishes nothing more."""
        self._end()

    def abandon(self) -> None:
        """The cycle was cut short (the lock lost, the bus out of reach, the task cancelled): this epoch ends."""
        if self._step is not IDLE:
            self._end()

    def bus_check_due(self, now: float) -> bool:
        """Whether to ask the bus now (at most every BUS_CHECK_EVERY seconds) if it lost what this relay
        published: a publish finds out by itself, this finds out for a partition with nothing to publish."""
        if now - self._bus_checked_at < BUS_CHECK_EVERY:
            return False
        self._bus_checked_at = now
        return True

    def bus_checked(self, behind: bool) -> bool:
        """The bus's answer between cycles; True: a cycle is due (with no cursor) to send every team's state."""
        self.behind = self.behind or behind
        return self.behind

    # -- the cycle's steps

    def _after_markers(self) -> Action:
        if self._extras_due:
            self._step = EXTRAS
            return COLLECT_EXTRAS
        return self._after_extras()

    def _after_extras(self) -> Action:
        core = self.core
        missing = core.channels_without_seq()
        if self._finishes:
            missing += core.channels_for_finishes(self._finishes)
        if self._extras:
            teams = {channels.team(t) for t, _ in self._extras}
            missing += [c for c in teams if c not in missing and not core.knows_seq(c)]
        if missing:
            self._step = SEQS
            return ReadSeqs(missing)
        return self._compose()

    def _compose(self) -> Action:
        """The cycle's messages, taken from the batcher: from here they are sent as they are until they go out."""
        core, now = self.core, self._now
        core.refresh_eta(now, self._wall)
        publications = core.take_job_publications(now) + core.take_team_publications(now)
        if self._finishes:
            publications += core.finish_publications(self._finishes, self._markers)
        for team_id, update in self._extras:
            publications.append(core.team_extra_publication(team_id, update))
        self._publications = publications
        rows = core.submissions.take_to_save()
        if rows:  # saved before they go out: a window read after a row's delta arrived is never older than it
            self._step = ROWS
            return SaveRows(rows)
        return self._after_rows()

    def _after_rows(self) -> Action:
        if not self._publications and self._cursor is None and not self.behind:
            return self._after_publish()
        self._step = PROVING
        return FIRST_PROOF

    def _attempt(self) -> Action:
        if self.behind:
            self._step = REFILLING
            return RAISE_FENCE
        return self._publish()

    def _publish(self) -> Action:
        self._step = PUBLISHING
        return Publish(self._publications, self._cursor)

    def _refill(self, now: float) -> Action:
        """The bus lost what this relay published (it restarted empty, or failed over to a replica behind the old
        primary): the fence is up again, so send every team's whole state with the cycle's messages."""
        core = self.core
        core.mark_all_dirty()
        self._publications += core.take_team_publications(now)
        self.behind = False
        rows = core.submissions.take_to_save()
        if rows:
            self._step = REFILL_ROWS
            return SaveRows(rows)
        return self._publish()

    def _wait(self) -> Action:
        self._step = WAITING
        return Wait(self._delay)

    def _after_publish(self) -> Action:
        """Published first, recorded second: a crash between is caught by the finishes' markers on the bus."""
        if self._markers:
            self._step = RECORDING
            return RecordClosed(list(self._markers))
        return self._announce_changes()

    def _announce_changes(self) -> Action:
        core, out = self.core, self._announcements
        memberships = core.take_memberships()
        if memberships:
            out.append(MembershipsChanged(memberships))
        moved = core.take_ownerships()
        if moved:  # an announcement of its own, on a channel of its own (gateway.bus.announcements)
            out.append(OwnershipsChanged(moved))
        return self._announce()

    def _announce(self) -> Action:
        if self._announcements:
            self._step = ANNOUNCING
            return Announce(self._announcements.pop(0))
        self._reset()
        self._step = IDLE
        return DONE

    def _end(self) -> None:
        self._step = ENDED
        self._reset()
