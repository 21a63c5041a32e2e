"""The benchmark's subscriber of this project's gateway (docs/protocol.md): what it sends and what it keeps.

It subscribes to each channel (with its cursor when reconnecting), then pings; it applies snapshot pages (page 0
replaces) and batches (highest version wins, ``removed_at`` removes). Where each channel stands, and what a
message means for it (a duplicate, a gap, a lost page), is gateway.core.follower's, as for every client: a gap
or a ``resync`` subscribes again without a cursor. *Live* once the pong of that ping has arrived and no channel
awaits its final snapshot page: the gateway handles a connection's messages in order, so the pong follows every
snapshot or replay.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from gateway.core.follower import Position, Verdict

from . import gateway_wire as wire
from .counters import MAX_GAP_SAMPLES, Stats
from .jobstate import SHIFT, STATUS_CODES, dt_ms, is_team, status_code, unpack_jobs

_json_encode = msgspec.json.encode
_msgpack_encode = msgspec.msgpack.encode
RETRY_UNAVAILABLE = (0.5, 1.5)  # seconds: subscribe again after an `unavailable` error


def _noop() -> None:
    pass


class _Channel(Position):
    """Where a channel stands (its seq, cursor and snapshot pages) and what the benchmark keeps of it."""

    __slots__ = ("jobs", "counts", "failed")

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[int, int] = {}
        self.counts: dict[str, int] | None = None
        self.failed: str | None = None  # an error code that will not go away by itself (forbidden, ...)

    @property
    def pending(self) -> bool:
        """Awaiting its (final) snapshot page."""
        return not self.ready


def _apply_batch(jobs: dict[int, int], changes: list[wire.Job], now: float, st: Stats) -> None:
    """A batch's jobs: the highest version wins, `removed_at` removes; latency from each job's `updated_at`."""
    add = st.latency.add
    codes = STATUS_CODES
    for j in changes:
        old = jobs.get(j.id)
        if old is not None and (old >> SHIFT) >= j.version:
            st.stale += 1
            continue
        if j.removed_at is not None:
            jobs.pop(j.id, None)
            st.removed += 1
        else:
            code = codes.get(j.status)
            jobs[j.id] = (j.version << SHIFT) | (code if code is not None else status_code(j.status))
        st.deltas += 1
        u = j.updated_at
        if u is not None:
            add(now - (u.timestamp() * 1000.0 if u.tzinfo is not None else dt_ms(u)))


def _apply_page(jobs: dict[int, int], page: list[wire.Job]) -> None:
    """A snapshot page's jobs (a removed one is not listed)."""
    codes = STATUS_CODES
    for j in page:
        if j.removed_at is None:
            code = codes.get(j.status)
            jobs[j.id] = (j.version << SHIFT) | (code if code is not None else status_code(j.status))


class GatewayDialect:
    """This project's gateway (docs/protocol.md). ``fmt="msgpack"`` asks for the msgpack subprotocol."""

    __slots__ = (
        "stats",
        "chans",
        "send",
        "notify",
        "ponged",
        "ping_id",
        "connection",
        "binary",
        "_decode",
        "_decode_other",
        "_connected",
    )

    def __init__(self, channels: Sequence[str], stats: Stats, fmt: str = "json") -> None:
        self.stats = stats
        self.chans: dict[str, _Channel] = {name: _Channel() for name in dict.fromkeys(channels)}
        self.send: Callable[[bytes, bool], None] | None = None
        self.notify: Callable[[], None] = _noop
        self.ponged = False
        self.ping_id = 0
        self.connection = 0  # counts connections: a retry scheduled on one is dropped on the next
        self.binary = fmt == "msgpack"
        self._decode = (wire.msgpack_messages if self.binary else wire.json_messages).decode
        self._decode_other = (wire.msgpack_other if self.binary else wire.json_other).decode
        self._connected = False

    @property
    def headers(self) -> list[str]:
        return ["Sec-WebSocket-Protocol: msgpack"] if self.binary else []

    @staticmethod
    def target(path: str, query: str) -> tuple[str, str]:
        if not path.endswith("/ws"):
            path = path.rstrip("/") + "/ws"
        return path, query

    def _write(self, message: dict) -> None:
        if self.send is not None and self._connected:
            self.send(_msgpack_encode(message) if self.binary else _json_encode(message), self.binary)

    def _subscribe(self, name: str, cursor: str | None) -> None:
        message: dict[str, Any] = {"type": "subscribe", "channel": name}
        if cursor is not None:
            message["cursor"] = cursor
        self._write(message)

    def opened(self, send: Callable[[bytes, bool], None]) -> None:
        self.send = send
        self._connected = True
        self.ponged = False
        for name, ch in self.chans.items():
            ch.failed = None
            # A channel whose snapshot was cut off mid-pages cannot resume: its cursor would skip the rest.
            self._subscribe(name, ch.resume_cursor)
        self.connection += 1
        self._ping()

    def _ping(self) -> None:
        self.ponged = False
        self.ping_id += 1
        self._write({"type": "ping", "id": self.ping_id})

    def closed(self) -> None:
        self._connected = False
        self.ponged = False

    def ready(self) -> bool:
        if not self.ponged:
            return False
        for ch in self.chans.values():
            if not ch.ready or ch.failed is not None:
                return False
        return True

    def raw_states(self) -> dict[str, Any]:
        return {name: (ch.counts if is_team(name) else ch.jobs) for name, ch in self.chans.items()}

    def states(self) -> dict[str, Any]:
        """{channel: {job_id: (version, status)}} ({status: count} for team channels)."""
        return {
            name: (dict(s) if s is not None and is_team(name) else (None if s is None else unpack_jobs(s)))
            for name, s in self.raw_states().items()
        }

    def cursors(self) -> dict[str, str | None]:
        return {name: ch.cursor for name, ch in self.chans.items()}

    def shows(self, marks: Mapping[str, tuple[str, Any, int]]) -> bool:
        """Whether this subscriber holds each mark of its channels: ("job", id, version) a job at that
        version or newer, ("count", status, n) a team's count of that status (see Fleet.until)."""
        for name, ch in self.chans.items():
            mark = marks.get(name)
            if mark is None:
                continue
            kind, key, value = mark
            if kind == "job":
                held = ch.jobs.get(key)
                if held is None or held >> SHIFT < value:
                    return False
            elif ch.counts is None or ch.counts.get(key) != value:
                return False
        return True

    # -- receiving

    def _follows(self, ch: _Channel, name: str, seq: int, cursor: str | None) -> bool:
        """Contiguous seq: take it. At or below: a duplicate. A gap: subscribe again without a cursor."""
        prev = ch.seq
        verdict = ch.message(seq, cursor)
        if verdict is Verdict.APPLY:
            return True
        if verdict is Verdict.DUPLICATE:
            st = self.stats
            st.duplicates += 1
            if len(st.duplicate_samples) < MAX_GAP_SAMPLES:
                st.duplicate_samples.append((time.time(), name, prev if prev is not None else -1, seq))
        else:
            self._gap(name, ch, prev, seq)
        return False

    def _gap(self, name: str, ch: _Channel, prev: int | None, seq: int) -> None:
        st = self.stats
        st.gaps += 1
        if len(st.gap_samples) < MAX_GAP_SAMPLES:
            st.gap_samples.append((time.time(), name, prev if prev is not None else -1, seq))
        self._resubscribe(name, ch, clear=False)

    def _resubscribe(self, name: str, ch: _Channel, clear: bool) -> None:
        if clear:
            ch.jobs = {}
            ch.counts = None
        ch.reload()
        self._subscribe(name, None)
        self.notify()

    def message(self, opcode: int, payload: bytes | bytearray, now: float) -> None:
        try:
            m = self._decode(payload)
        except msgspec.ValidationError:
            self._other(payload)
            return
        except msgspec.DecodeError:
            self.stats.decode_errors += 1
            return
        if isinstance(m, wire.Batch):
            ch = self.chans.get(m.channel)
            if ch is None:
                self.stats.foreign += 1
            elif ch.ready and self._follows(ch, m.channel, m.seq, m.cursor):
                _apply_batch(ch.jobs, m.jobs, now, self.stats)
        elif isinstance(m, wire.Snapshot):
            self._snapshot(m)
        elif isinstance(m, wire.Summary):
            ch = self.chans.get(m.channel)
            if ch is None:
                self.stats.foreign += 1
            elif ch.ready and self._follows(ch, m.channel, m.seq, m.cursor):
                if m.counts is not None:
                    ch.counts = m.counts
                self.stats.summaries += 1
                newest = max((dt_ms(s.updated_at) for s in m.trajectories if s.updated_at is not None), default=None)
                if newest is not None:
                    self.stats.summary_latency.add(now - newest)
        elif isinstance(m, wire.Pong):
            if m.id == self.ping_id and not self.ponged:
                self.ponged = True
                self.notify()
        elif isinstance(m, wire.Resync):
            self.stats.resyncs += 1
            ch = self.chans.get(m.channel)
            if ch is not None and ch.resync() is Verdict.RESYNC:
                self._resubscribe(m.channel, ch, clear=True)
        elif isinstance(m, wire.Error):
            self._error(m)
        else:  # notice, glow, presence, clusters: only the position
            ch = self.chans.get(m.channel)
            if ch is None:
                self.stats.foreign += 1
            elif ch.ready:
                self._follows(ch, m.channel, m.seq, m.cursor)

    def _snapshot(self, m: wire.Snapshot) -> None:
        ch = self.chans.get(m.channel)
        st = self.stats
        if ch is None:
            st.foreign += 1
            return
        ready = ch.ready
        if ch.snapshot(m.seq, m.cursor, m.page, m.final) is Verdict.GAP:  # a page was lost
            self._gap(m.channel, ch, ch.seq, m.seq)
            return
        st.snapshot_pages += 1
        if m.page == 0:
            ch.jobs = {}
            if is_team(m.channel):
                ch.counts = None
        if m.jobs:
            _apply_page(ch.jobs, m.jobs)
            st.snapshot_jobs += len(m.jobs)
        if m.counts is not None:
            ch.counts = m.counts
        ch.failed = None
        if ready != ch.ready:
            self.notify()

    def _error(self, m: wire.Error) -> None:
        self.stats.count(self.stats.errors, m.code)
        name = m.channel
        ch = self.chans.get(name) if name is not None else None
        if ch is None or name is None or m.code == "rate_limited":
            return
        if m.code == "unavailable":  # the same request again shortly: with the cursor, nothing to reload
            ch.failed = m.code
            self.notify()
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            loop.call_later(random.uniform(*RETRY_UNAVAILABLE), self._retry_unavailable, name, self.connection)
        else:  # forbidden, bad_channel, too_many_subscriptions: it stays so
            ch.failed = m.code
            self.notify()

    def _retry_unavailable(self, name: str, connection: int) -> None:
        ch = self.chans[name]
        # Still on the same connection (a reconnect subscribes every channel by itself).
        if ch.failed == "unavailable" and self._connected and connection == self.connection:
            ch.failed = None
            self._subscribe(name, ch.resume_cursor)
            self._ping()  # live again once its pong follows the channel's replay or snapshot

    def _other(self, payload: bytes | bytearray) -> None:
        try:
            m = self._decode_other(payload)
        except (msgspec.ValidationError, msgspec.DecodeError):
            self.stats.decode_errors += 1
            return
        self.stats.unknown += 1
        ch = self.chans.get(m.channel) if m.channel is not None else None
        if ch is not None and m.channel is not None and m.seq is not None and ch.ready:
            self._follows(ch, m.channel, m.seq, m.cursor)
