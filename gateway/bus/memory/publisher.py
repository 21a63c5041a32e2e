"""The relay's side of the memory bus: what gateway.bus.publisher's script does, in one synchronous step.

A cycle runs without awaiting anything between its messages, so it is atomic as the script is: no reader can
see a channel's position without its history entry and state, and a fenced-out relay writes nothing.
"""

from __future__ import annotations

from ...core import envelope
from ...core.publication import Publication
from .. import keys
from ..history import Entry
from ..publisher import HISTORY_BYTES, BusBehind, Fenced
from .keyspace import Keyspace
from .pubsub import Exchange

MARKER_TTL = 86400.0  # a successor skips a once-only event published within the last day


class MemoryPublisher:
    """One partition's publishing under one relay epoch."""

    def __init__(
        self,
        space: Keyspace,
        exchange: Exchange,
        tag: str,
        epoch: int,
        history_length: int,
        history_ttl: int,
        history_bytes: int = HISTORY_BYTES,
    ) -> None:
        self.space = space
        self.exchange = exchange
        self.tag = tag
        self.epoch = epoch
        self.history_length = history_length
        self.history_ttl = history_ttl
        self.history_bytes = history_bytes
        self._cursor_on_bus: str | None = None  # the relay cursor last read or written; None: nothing to check

    async def take_over(self) -> None:
        self.space.reachable()
        if self._fenced():
            raise Fenced(f"epoch {self.epoch} is older than the fence")
        self.space.writable()
        self.space.fences[self.tag] = self.epoch

    async def fence_exists(self) -> bool:
        self.space.reachable()
        return self.tag in self.space.fences

    async def behind(self) -> bool:
        self.space.reachable()
        expected = self._cursor_on_bus
        return (
            self.tag not in self.space.fences or expected is not None and self.space.cursors.get(self.tag) != expected
        )

    async def last_seqs(self, channels: list[str]) -> dict[str, int]:
        self.space.reachable()
        positions = self.space.positions
        return {c: positions[(self.tag, c)][1] if (self.tag, c) in positions else 0 for c in channels}

    def marker(self, trajectory_id: int, wave: int) -> str:
        return keys.finish_marker(self.tag, trajectory_id, wave)

    async def published_markers(self, markers: list[str]) -> set[str]:
        self.space.reachable()
        return {m for m in markers if m in self.space.markers and self.space.alive(self.space.markers[m])}

    async def relay_cursor(self) -> str | None:
        self.space.reachable()
        self._cursor_on_bus = self.space.cursors.get(self.tag)
        return self._cursor_on_bus

    async def publish(
        self,
        publications: list[Publication],
        relay_cursor: str | None = None,
        committed: float = 0.0,
        trace: str | None = None,
    ) -> None:
        if not publications and relay_cursor is None:
            return
        self.space.reachable()
        if self._fenced():
            raise Fenced(f"relay epoch {self.epoch} was fenced out by a newer relay")
        expected, held = self._cursor_on_bus, self.space.cursors.get(self.tag)
        if expected is not None and held != expected and not (relay_cursor and held == relay_cursor):
            raise BusBehind(f"the bus holds another relay cursor than {expected}")
        self.space.writable()  # refused whole, as the script's first write is the one Redis checks
        published = self.space.clock()  # in each envelope, as the Redis publisher stamps it
        positions = self.space.positions
        for p in publications:
            at = positions.get((self.tag, p.channel))
            if at is not None and at[0] == self.epoch and at[1] >= p.seq:
                continue  # a cycle sent again: this message went out the first time
            self._publish_one(p, published, committed, trace)
        if relay_cursor:
            self.space.cursors[self.tag] = relay_cursor
            self._cursor_on_bus = relay_cursor

    def _fenced(self) -> bool:
        return self.space.fences.get(self.tag, 0) > self.epoch

    def _publish_one(self, p: Publication, published: float, committed: float, trace: str | None) -> None:
        space, key = self.space, (self.tag, p.channel)
        env = envelope.pack(p.epoch, p.seq, p.json, p.msgpack, published, committed, trace)
        space.positions[key] = (self.epoch, p.seq)
        # The history entry is the envelope's tail, as the script cuts it (the whole envelope when empty).
        entry = Entry(self.epoch, p.seq, env[-len(p.msgpack) :])
        space.append(key, entry, self.history_length, self.history_bytes, self.history_ttl)
        self._write_state(p)
        self.exchange.publish(self.tag, p.channel, env)
        if p.marker is not None:
            space.markers[p.marker] = space.clock() + MARKER_TTL

    def _write_state(self, p: Publication) -> None:
        key = (self.tag, p.channel)
        state = self.space.states.get(key)
        stamp = {b"seq": str(p.seq).encode(), b"epoch": str(self.epoch).encode()}
        if p.state_set is not None or p.state_del:
            state = self.space.states.setdefault(key, {})
            state.update(stamp)
            state.update({name.encode(): value for name, value in (p.state_set or {}).items()})
        elif state is not None:
            # An event (a glow, a notice) changes no state, but a snapshot of the state is now at its seq.
            state.update(stamp)
        if state is not None:
            for name in p.state_del or []:
                state.pop(name.encode(), None)
