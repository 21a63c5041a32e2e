"""The benchmark's subscriber of the plain peers (floor, node-ws, broadcaster, broadcaster-pg): ``GET
/ws?channels=a,b``, then text frames ``{"channel": ..., "changes": [job, ...]}``, each job its whole state (the
gateway's fields; only those read here are decoded). Live once the handshake is done. A change with ``removed``
true or ``removed_at`` set removes the job (socket.io's changes too); its ``updated_at`` is the change's time.
A team room's frame also has the team's ``counts`` (status -> n) and, from the tap, their ``seq``: the counts
with the highest seq are kept (without one, the latest), among the room's jobs (jobstate.pack_counts).

Where the peers send each channel's current state at connect (``"state": true``: every listed job; fanout and
storm, see bench/load.py), it is applied as a snapshot (the highest version wins; no delta, no latency: its jobs
changed long ago), and with ``await_state`` a subscriber is live only once it holds every channel's state."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import msgspec

from .counters import Stats
from .jobstate import SHIFT, STATUS_CODES, dt_ms, pack_counts, status_code, unpack_jobs


def noop() -> None:
    pass


class Change(msgspec.Struct):
    id: int
    version: int
    status: str = ""
    updated_at: datetime | None = None
    channel: str | None = None
    removed: bool = False
    removed_at: str | float | None = None


class PlainMessage(msgspec.Struct):
    channel: str
    changes: list[Change] = []
    counts: dict[str, int] | None = None
    seq: int = 0
    state: bool = False


_plain_decode = msgspec.json.Decoder(PlainMessage).decode


def apply_counts(jobs: dict[int, int], counts: dict[str, int], seq: int, seen: dict[str, int], channel: str) -> None:
    """A team room's counts, unless a later message (a higher `seq`) already brought newer ones."""
    if seq < seen.get(channel, 0):
        return
    seen[channel] = seq
    pack_counts(jobs, counts)


def apply_changes(jobs: dict[int, int], changes: Iterable[Change], now: float, st: Stats) -> None:
    add = st.latency.add
    codes = STATUS_CODES
    for c in changes:
        old = jobs.get(c.id)
        if old is not None and (old >> SHIFT) >= c.version:
            st.stale += 1
            continue
        if c.removed or c.removed_at is not None:
            jobs.pop(c.id, None)
            st.removed += 1
        else:
            code = codes.get(c.status)
            jobs[c.id] = (c.version << SHIFT) | (code if code is not None else status_code(c.status))
        st.deltas += 1
        if c.updated_at is not None:
            add(now - dt_ms(c.updated_at))


def apply_state(jobs: dict[int, int], state: Iterable[Change], st: Stats) -> None:
    """A channel's state as a peer sends it at connect: every listed job, each kept unless a newer version came
    first (a change published while the peer read the state)."""
    codes = STATUS_CODES
    st.snapshot_pages += 1
    for c in state:
        old = jobs.get(c.id)
        if (old is not None and (old >> SHIFT) >= c.version) or c.removed or c.removed_at is not None:
            continue
        code = codes.get(c.status)
        jobs[c.id] = (c.version << SHIFT) | (code if code is not None else status_code(c.status))
        st.snapshot_jobs += 1


def with_query(query: str, extra: str) -> str:
    return f"{query}&{extra}" if query else extra


class PlainDialect:
    """``GET /ws?channels=a,b``; text frames ``{"channel": ..., "changes": [...]}``. With `await_state`, live once
    every channel's state (``"state": true``) has arrived on this connection."""

    __slots__ = ("stats", "chans", "counts_seq", "notify", "await_state", "awaiting", "_open")
    headers: list[str] = []

    def __init__(self, channels: Sequence[str], stats: Stats, await_state: bool = False) -> None:
        self.stats = stats
        self.chans: dict[str, dict[int, int]] = {name: {} for name in dict.fromkeys(channels)}
        self.counts_seq: dict[str, int] = {}  # a team room's seq of the counts held
        self.notify: Callable[[], None] = noop
        self.await_state = await_state
        self.awaiting: set[str] = set()  # channels whose state has not arrived on this connection yet
        self._open = False

    def target(self, path: str, query: str) -> tuple[str, str]:
        if not path.endswith("/ws"):
            path = path.rstrip("/") + "/ws"
        return path, with_query(query, "channels=" + quote(",".join(self.chans), safe=":,"))

    def opened(self, send: Callable[[bytes, bool], None]) -> None:
        self._open = True
        self.awaiting = set(self.chans) if self.await_state else set()
        self.notify()

    def closed(self) -> None:
        self._open = False

    def ready(self) -> bool:
        return self._open and not self.awaiting

    def raw_states(self) -> dict[str, Any]:
        return dict(self.chans)

    def states(self) -> dict[str, Any]:
        return {name: unpack_jobs(jobs) for name, jobs in self.chans.items()}

    def message(self, opcode: int, payload: bytes | bytearray, now: float) -> None:
        try:
            m = _plain_decode(payload)
        except (msgspec.ValidationError, msgspec.DecodeError):
            self.stats.decode_errors += 1
            return
        jobs = self.chans.get(m.channel)
        if jobs is None:
            self.stats.foreign += 1
            return
        if m.state:
            apply_state(jobs, m.changes, self.stats)
        else:
            apply_changes(jobs, m.changes, now, self.stats)
        if m.counts is not None:
            apply_counts(jobs, m.counts, m.seq, self.counts_seq, m.channel)
        if m.state and m.channel in self.awaiting:
            self.awaiting.discard(m.channel)
            if not self.awaiting:
                self.notify()
