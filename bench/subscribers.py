"""Websocket subscribers for the load benchmark: thousands of them, cheap enough not to be the bottleneck.

Each subscriber is a raw ``asyncio.Protocol`` websocket client (RFC 6455, ws:// only) on uvloop, with no
websockets library on the hot path: received frames are parsed from one ``bytearray`` and
messages decoded with msgspec into small Structs holding only the fields the benchmark needs. Subscribers
are spread over worker processes (multiprocessing, spawn context) driven by a :class:`Fleet` in the
harness's process over Pipes.

A *dialect* is how a subscriber speaks to one system and what it keeps (per channel, job id -> (version,
status); for the gateway's ``team:N`` channels, the latest ``counts``):

``gateway`` / ``gateway-msgpack``
    ``/ws`` of this project (docs/protocol.md): subscribe to each channel (with its cursor when
    reconnecting), then ``ping``; snapshot pages (page 0 replaces), batches (highest version wins,
    ``removed_at`` removes), ``seq`` checked (a gap or a ``resync`` subscribes again without a cursor).
    *Live* once the pong of that ping has arrived and no channel awaits its final snapshot page: the
    gateway handles a connection's messages in order, so the pong follows every snapshot or replay.
``plain`` (floor, node-ws, broadcaster)
    ``GET /ws?channels=a,b``; each text frame is ``{"channel": ..., "changes": [{"id", "version",
    "status", "t", ...}]}``. Live once the handshake is done.
``socketio`` (Socket.IO 4 / Engine.IO 4, node and python-socketio)
    ``/socket.io/?EIO=4&transport=websocket``; ``0{..}`` -> ``40``; ``40{..}`` -> ``42["join",ch]`` per
    channel; ``2`` -> ``3``; ``42["job", change-with-channel]``. Live once the joins are sent (the
    servers acknowledge nothing).

A change (plain, socketio) with ``removed`` true or ``removed_at`` set removes the job. ``t`` is the
change's time in milliseconds since the Unix epoch (seconds are accepted too: values below 1e11 are
taken as seconds).

Compression (``Fleet(deflate=True)``): every subscriber offers permessage-deflate (RFC 7692) as browsers do
(``permessage-deflate; client_max_window_bits``) and sends its own messages uncompressed. A server that answers
``server_no_context_takeover`` (the gateway) has each compressed message inflated with a fresh context; one
that keeps its context (Node ``ws`` by default) with one inflate context per connection. ``bytes`` counts
what came off the socket, compressed.

Latency: receive time (``time.time()`` when the bytes arrived) minus the job's ``updated_at`` (gateway)
or ``t`` (plain, socketio), in milliseconds, recorded in a :class:`Histogram` per worker process (exact
counts per bucket: exact to the microsecond below 256 µs, then 128 buckets per power of two, so a
percentile is within 0.4 % of the true value; count, sum, min and max are exact). Histograms merge by
adding bucket counts; the parent computes the percentiles. Gateway team ``summary`` latency (now - the
newest ``trajectories[].updated_at``) goes to a separate histogram: it includes the 250 ms throttle.

    fleet = Fleet(lambda i: f"ws://127.0.0.1:8000/ws?token={tokens[i % len(tokens)]}", "gateway",
                  lambda i: [f"trajectory:{1 + i % 20}"], n=2000, processes=2, connect_rate=1000)
    await fleet.start()
    await fleet.wait_live(60)
    await fleet.reset_stats()
    ...  # the measured phase
    print(await fleet.stats())
    report = compare_states(await fleet.states(), expected_from_the_database)
    print(await fleet.storm(60))
    await fleet.stop()

The harness's ``__main__`` must guard its entry point with ``if __name__ == "__main__":``: spawned workers
import the main module again.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import math
import multiprocessing
import os
import random
import resource
import signal
import time
import traceback
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

import msgspec

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 64 << 20  # a bigger message (or fragmented message) closes with 1009
MAX_HEAD = 64 << 10  # HTTP response head

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
DEFLATE_OFFER = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits"
_FLUSH_TAIL = b"\x00\x00\xff\xff"  # RFC 7692 7.2.2: put back before inflating a message

UTC = UTC
MAX_GAP_SAMPLES = 20

# ---------------------------------------------------------------------------------------------------------
# Latency histogram and counters


class Histogram:
    """Latencies in milliseconds, bucketed by microsecond: exact below 256 µs, then 128 buckets per power of
    two (a bucket's midpoint is within 0.4 % of any value in it). Mergeable: bucket counts add up.
    Count, sum, min and max are exact; negative latencies (clock skew) land in bucket 0 and are counted."""

    __slots__ = ("counts", "count", "total", "min", "max", "negative")

    def __init__(self) -> None:
        self.counts: list[int] = []
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.negative = 0

    def __getstate__(self) -> tuple:
        return (self.counts, self.count, self.total, self.min, self.max, self.negative)

    def __setstate__(self, s: tuple) -> None:
        self.counts, self.count, self.total, self.min, self.max, self.negative = s

    def add(self, ms: float) -> None:
        us = int(ms * 1000.0)
        if us < 256:
            if us < 0:
                self.negative += 1
                us = 0
            i = us
        else:
            e = us.bit_length() - 8
            i = 256 + ((e - 1) << 7) + ((us >> e) - 128)
        c = self.counts
        if i >= len(c):
            c.extend([0] * (i + 1 - len(c)))
        c[i] += 1
        self.count += 1
        self.total += ms
        if ms > self.max:
            self.max = ms
        if ms < self.min:
            self.min = ms

    def merge(self, other: Histogram) -> Histogram:
        c, o = self.counts, other.counts
        if len(o) > len(c):
            c.extend([0] * (len(o) - len(c)))
        for i, v in enumerate(o):
            if v:
                c[i] += v
        self.count += other.count
        self.total += other.total
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.negative += other.negative
        return self

    @staticmethod
    def _midpoint_us(i: int) -> float:
        if i < 256:
            return i + 0.5
        k = i - 256
        e = (k >> 7) + 1
        low = ((k & 127) + 128) << e
        return low + (1 << e) / 2

    def percentile(self, q: float) -> float | None:
        """The q-th percentile (0 < q <= 100) in milliseconds; None when empty."""
        if not self.count:
            return None
        if q >= 100:
            return self.max
        rank = max(1, math.ceil(q / 100 * self.count))
        seen = 0
        for i, v in enumerate(self.counts):
            seen += v
            if seen >= rank:
                return min(max(self._midpoint_us(i) / 1000.0, self.min), self.max)
        return self.max

    def summary(self) -> dict[str, float | int | None]:
        """count, mean, p50, p90, p99, p99.9, min, max (ms), negative."""
        if not self.count:
            return {
                "count": 0,
                "mean": None,
                "p50": None,
                "p90": None,
                "p99": None,
                "p999": None,
                "min": None,
                "max": None,
                "negative": 0,
            }
        return {
            "count": self.count,
            "mean": self.total / self.count,
            "p50": self.percentile(50),
            "p90": self.percentile(90),
            "p99": self.percentile(99),
            "p999": self.percentile(99.9),
            "min": self.min,
            "max": self.max,
            "negative": self.negative,
        }


class Stats:
    """One worker process's counters (shared by all its subscribers). Plain ints; dicts count by key."""

    COUNTERS = (
        "bytes",  # bytes received (handshake responses included)
        "frames",  # websocket frames received, control frames included
        "messages",  # complete data messages (text or binary) received
        "deltas",  # job deltas applied (a newer version, or a removal)
        "stale",  # job deltas ignored: not newer than the version held
        "removed",  # jobs removed (removed_at / removed)
        "snapshot_pages",
        "snapshot_jobs",
        "summaries",  # gateway team summaries applied
        "connects",  # handshakes completed (101)
        "failed_connects",  # refused (non-101), unreachable, timed out, bad accept
        "resyncs",
        "gaps",  # a channel seq that did not follow: subscribed again (the first ones in gap_samples)
        "duplicates",  # a channel message at or below the seq held: ignored
        "decode_errors",
        "unknown",  # messages of a type the dialect does not know (seq/cursor still tracked)
        "foreign",  # messages about a channel the subscriber does not follow
        "server_pings",
        "protocol_errors",
    )
    __slots__ = COUNTERS + ("closes", "errors", "failures", "gap_samples", "latency", "summary_latency", "since")
    bytes: int
    frames: int
    messages: int
    deltas: int
    stale: int
    removed: int
    snapshot_pages: int
    snapshot_jobs: int
    summaries: int
    connects: int
    failed_connects: int
    resyncs: int
    gaps: int
    duplicates: int
    decode_errors: int
    unknown: int
    foreign: int
    server_pings: int
    protocol_errors: int

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        for name in self.COUNTERS:
            setattr(self, name, 0)
        self.closes: dict[int, int] = {}  # close code -> count (1006: the connection dropped without a close frame)
        self.errors: dict[str, int] = {}  # gateway error code -> count
        self.failures: dict[
            str, int
        ] = {}  # failed connect: HTTP status ("503") or reason ("ConnectionRefusedError", "timeout")
        self.gap_samples: list[tuple[float, str, int, int]] = []  # the first gaps: (time, channel, seq held, seq got)
        self.latency = Histogram()
        self.summary_latency = Histogram()
        self.since = time.time()

    def count(self, table: dict, key: Any) -> None:
        table[key] = table.get(key, 0) + 1

    def export(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in self.COUNTERS}
        out.update(
            closes=dict(self.closes),
            errors=dict(self.errors),
            failures=dict(self.failures),
            gap_samples=list(self.gap_samples),
            latency=self.latency,
            summary_latency=self.summary_latency,
            since=self.since,
        )
        return out


def merge_stats(parts: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Merge exported Stats (and gauges) of several workers: counters and gauges add up, histograms merge."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, Histogram):
                out.setdefault(key, Histogram()).merge(value)
            elif isinstance(value, list):
                out[key] = sorted(out.get(key, []) + value)[:MAX_GAP_SAMPLES]
            elif isinstance(value, dict):
                table = out.setdefault(key, {})
                for k, v in value.items():
                    table[k] = table.get(k, 0) + v
            elif key == "since":
                out[key] = min(out.get(key, value), value)
            else:
                out[key] = out.get(key, 0) + value
    return out


# ---------------------------------------------------------------------------------------------------------
# State: job id -> version and status packed in one int (version << 8 | status code)

SHIFT = 8
MASK = (1 << SHIFT) - 1
STATUS_NAMES: list[str] = ["queued", "retrying", "running", "completed", "failed", "holding", "preempted"]
_STATUS_CODES: dict[str, int] = {s: i for i, s in enumerate(STATUS_NAMES)}


def status_code(status: str) -> int:
    code = _STATUS_CODES.get(status)
    if code is None:
        if len(STATUS_NAMES) > MASK:
            raise ValueError(f"too many distinct statuses (at {status!r})")
        code = _STATUS_CODES[status] = len(STATUS_NAMES)
        STATUS_NAMES.append(status)
    return code


def unpack_jobs(jobs: Mapping[int, int]) -> dict[int, tuple[int, str]]:
    """A packed jobs state as {job_id: (version, status)}."""
    names = STATUS_NAMES
    return {k: (v >> SHIFT, names[v & MASK]) for k, v in jobs.items()}


def _dt_ms(dt: datetime) -> float:
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp() * 1000.0


def _is_team(channel: str) -> bool:
    return channel.startswith("team:")


# ---------------------------------------------------------------------------------------------------------
# Dialects. Each: target(path, query) -> (path, query); headers (extra handshake lines); opened(send);
# message(opcode, payload, now_ms); closed(); ready(); raw_states() -> {channel: packed jobs | counts}.
# send(data: bytes, binary: bool) writes one masked frame; notify() is called when ready() may have changed.


def _noop() -> None:
    pass


# -- gateway


class _GJob(msgspec.Struct):
    id: int
    version: int
    status: str
    updated_at: datetime | None = None
    removed_at: datetime | None = None


class _GTrajectory(msgspec.Struct):
    updated_at: datetime | None = None


class _GMessage(msgspec.Struct, tag_field="type"):
    pass


class _GSnapshot(_GMessage, tag="snapshot"):
    channel: str
    seq: int
    cursor: str
    page: int = 0
    final: bool = True
    jobs: list[_GJob] | None = None
    counts: dict[str, int] | None = None


class _GBatch(_GMessage, tag="batch"):
    channel: str
    seq: int
    cursor: str
    jobs: list[_GJob] = []


class _GSummary(_GMessage, tag="summary"):
    channel: str
    seq: int
    cursor: str
    counts: dict[str, int] | None = None
    trajectories: list[_GTrajectory] = []


class _GEvent(_GMessage):
    """A channel message whose content the benchmark does not keep: only its position counts."""

    channel: str
    seq: int
    cursor: str


class _GNotice(_GEvent, tag="notice"):
    pass


class _GGlow(_GEvent, tag="glow"):
    pass


class _GPresence(_GEvent, tag="presence"):
    pass


class _GClusters(_GEvent, tag="clusters"):
    pass


class _GResync(_GMessage, tag="resync"):
    channel: str
    reason: str = ""


class _GError(_GMessage, tag="error"):
    code: str = ""
    message: str = ""
    channel: str | None = None


class _GPong(_GMessage, tag="pong"):
    id: int | str | None = None


class _GOther(msgspec.Struct):
    """Any other message: its channel position is still tracked."""

    type: str = ""
    channel: str | None = None
    seq: int | None = None
    cursor: str | None = None


_GTypes = _GBatch | _GSnapshot | _GSummary | _GNotice | _GGlow | _GPresence | _GClusters | _GResync | _GError | _GPong
_gjson = msgspec.json.Decoder(_GTypes)
_gmsgpack = msgspec.msgpack.Decoder(_GTypes)
_gjson_other = msgspec.json.Decoder(_GOther)
_gmsgpack_other = msgspec.msgpack.Decoder(_GOther)
_json_encode = msgspec.json.encode
_msgpack_encode = msgspec.msgpack.encode


class _Channel:
    __slots__ = ("seq", "cursor", "jobs", "counts", "pending", "failed")

    def __init__(self) -> None:
        self.seq: int | None = None
        self.cursor: str | None = None
        self.jobs: dict[int, int] = {}
        self.counts: dict[str, int] | None = None
        self.pending = True  # awaiting its (final) snapshot page
        self.failed: str | None = None  # an error code that will not go away by itself (forbidden, ...)


RETRY_UNAVAILABLE = (0.5, 1.5)  # seconds: subscribe again after an `unavailable` error


class GatewayDialect:
    """This project's gateway (docs/protocol.md). ``fmt="msgpack"`` asks for the msgpack subprotocol."""

    __slots__ = (
        "stats",
        "chans",
        "send",
        "notify",
        "ponged",
        "ping_id",
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
        self.binary = fmt == "msgpack"
        self._decode = (_gmsgpack if self.binary else _gjson).decode
        self._decode_other = (_gmsgpack_other if self.binary else _gjson_other).decode
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
            self._subscribe(name, None if ch.pending else ch.cursor)
        self.ping_id += 1
        self._write({"type": "ping", "id": self.ping_id})

    def closed(self) -> None:
        self._connected = False
        self.ponged = False

    def ready(self) -> bool:
        if not self.ponged:
            return False
        for ch in self.chans.values():
            if ch.pending or ch.failed is not None:
                return False
        return True

    def raw_states(self) -> dict[str, Any]:
        return {name: (ch.counts if _is_team(name) else ch.jobs) for name, ch in self.chans.items()}

    def states(self) -> dict[str, Any]:
        """{channel: {job_id: (version, status)}} ({status: count} for team channels)."""
        return {
            name: (dict(s) if s is not None and _is_team(name) else (None if s is None else unpack_jobs(s)))
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

    def _follows(self, ch: _Channel, name: str, seq: int) -> bool:
        """Contiguous seq: take it. At or below: a duplicate. A gap: subscribe again without a cursor."""
        prev = ch.seq
        if prev is None or seq == prev + 1:
            ch.seq = seq
            return True
        if seq <= prev:
            self.stats.duplicates += 1
            return False
        st = self.stats
        st.gaps += 1
        if len(st.gap_samples) < MAX_GAP_SAMPLES:
            st.gap_samples.append((time.time(), name, prev, seq))
        self._resubscribe(name, ch, clear=False)
        return False

    def _resubscribe(self, name: str, ch: _Channel, clear: bool) -> None:
        if clear:
            ch.jobs = {}
            ch.counts = None
        ch.seq = ch.cursor = None
        ch.pending = True
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
        if isinstance(m, _GBatch):
            ch = self.chans.get(m.channel)
            if ch is None:
                self.stats.foreign += 1
            elif not ch.pending and self._follows(ch, m.channel, m.seq):
                ch.cursor = m.cursor
                self._apply(ch.jobs, m.jobs, now)
        elif isinstance(m, _GSnapshot):
            self._snapshot(m)
        elif isinstance(m, _GSummary):
            ch = self.chans.get(m.channel)
            if ch is None:
                self.stats.foreign += 1
            elif not ch.pending and self._follows(ch, m.channel, m.seq):
                ch.cursor = m.cursor
                if m.counts is not None:
                    ch.counts = m.counts
                self.stats.summaries += 1
                newest = max((_dt_ms(s.updated_at) for s in m.trajectories if s.updated_at is not None), default=None)
                if newest is not None:
                    self.stats.summary_latency.add(now - newest)
        elif isinstance(m, _GPong):
            if m.id == self.ping_id and not self.ponged:
                self.ponged = True
                self.notify()
        elif isinstance(m, _GResync):
            self.stats.resyncs += 1
            ch = self.chans.get(m.channel)
            if ch is not None:
                self._resubscribe(m.channel, ch, clear=True)
        elif isinstance(m, _GError):
            self._error(m)
        else:  # notice, glow, presence, clusters: only the position
            ch = self.chans.get(m.channel)
            if ch is None:
                self.stats.foreign += 1
            elif not ch.pending and self._follows(ch, m.channel, m.seq):
                ch.cursor = m.cursor

    def _apply(self, jobs: dict[int, int], changes: list[_GJob], now: float) -> None:
        st = self.stats
        add = st.latency.add
        codes = _STATUS_CODES
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
                add(now - (u.timestamp() * 1000.0 if u.tzinfo is not None else _dt_ms(u)))

    def _snapshot(self, m: _GSnapshot) -> None:
        ch = self.chans.get(m.channel)
        st = self.stats
        if ch is None:
            st.foreign += 1
            return
        st.snapshot_pages += 1
        if m.page == 0:
            ch.jobs = {}
            if _is_team(m.channel):
                ch.counts = None
        if m.jobs:
            jobs = ch.jobs
            codes = _STATUS_CODES
            for j in m.jobs:
                if j.removed_at is None:
                    code = codes.get(j.status)
                    jobs[j.id] = (j.version << SHIFT) | (code if code is not None else status_code(j.status))
            st.snapshot_jobs += len(m.jobs)
        if m.counts is not None:
            ch.counts = m.counts
        ch.seq, ch.cursor, ch.failed = m.seq, m.cursor, None
        was = ch.pending
        ch.pending = not m.final
        if was != ch.pending:
            self.notify()

    def _error(self, m: _GError) -> None:
        self.stats.count(self.stats.errors, m.code)
        name = m.channel
        ch = self.chans.get(name) if name is not None else None
        if ch is None or name is None or m.code == "rate_limited":
            return
        if m.code == "unavailable":  # try again shortly
            ch.pending = True
            ch.seq = ch.cursor = None
            self.notify()
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            loop.call_later(random.uniform(*RETRY_UNAVAILABLE), self._retry_unavailable, name, self.ping_id)
        else:  # forbidden, bad_channel, too_many_subscriptions: it stays so
            ch.failed = m.code
            self.notify()

    def _retry_unavailable(self, name: str, ping_id: int) -> None:
        ch = self.chans[name]
        # Still on the same connection (a reconnect subscribes every pending channel by itself).
        if ch.pending and ch.seq is None and self._connected and ping_id == self.ping_id:
            self._subscribe(name, None)

    def _other(self, payload: bytes | bytearray) -> None:
        try:
            m = self._decode_other(payload)
        except (msgspec.ValidationError, msgspec.DecodeError):
            self.stats.decode_errors += 1
            return
        self.stats.unknown += 1
        ch = self.chans.get(m.channel) if m.channel is not None else None
        if ch is not None and m.seq is not None and not ch.pending and self._follows(ch, m.channel, m.seq):  # type: ignore[arg-type]
            ch.cursor = m.cursor


# -- plain and socketio: absolute changes, highest version wins


class _Change(msgspec.Struct):
    id: int
    version: int
    status: str = ""
    t: float | None = None
    channel: str | None = None
    removed: bool = False
    removed_at: str | float | None = None


class _PlainMessage(msgspec.Struct):
    channel: str
    changes: list[_Change] = []


_plain_decode = msgspec.json.Decoder(_PlainMessage).decode


def _apply_changes(jobs: dict[int, int], changes: Iterable[_Change], now: float, st: Stats) -> None:
    add = st.latency.add
    codes = _STATUS_CODES
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
        t = c.t
        if t is not None:
            add(now - (t if t >= 1e11 else t * 1000.0))


def _with_query(query: str, extra: str) -> str:
    return f"{query}&{extra}" if query else extra


class PlainDialect:
    """``GET /ws?channels=a,b``; text frames ``{"channel": ..., "changes": [...]}``."""

    __slots__ = ("stats", "chans", "notify", "_open")
    headers: list[str] = []

    def __init__(self, channels: Sequence[str], stats: Stats) -> None:
        self.stats = stats
        self.chans: dict[str, dict[int, int]] = {name: {} for name in dict.fromkeys(channels)}
        self.notify: Callable[[], None] = _noop
        self._open = False

    def target(self, path: str, query: str) -> tuple[str, str]:
        if not path.endswith("/ws"):
            path = path.rstrip("/") + "/ws"
        return path, _with_query(query, "channels=" + quote(",".join(self.chans), safe=":,"))

    def opened(self, send: Callable[[bytes, bool], None]) -> None:
        self._open = True
        self.notify()

    def closed(self) -> None:
        self._open = False

    def ready(self) -> bool:
        return self._open

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
        _apply_changes(jobs, m.changes, now, self.stats)


_sio_event = msgspec.json.Decoder(tuple[str, _Change | list[_Change]]).decode
_sio_any = msgspec.json.Decoder().decode


class SocketIODialect:
    """Socket.IO 4 over a websocket (Engine.IO 4): join a room per channel, receive ``job`` events."""

    __slots__ = ("stats", "chans", "notify", "send", "_joined")
    headers: list[str] = []

    def __init__(self, channels: Sequence[str], stats: Stats) -> None:
        self.stats = stats
        self.chans: dict[str, dict[int, int]] = {name: {} for name in dict.fromkeys(channels)}
        self.notify: Callable[[], None] = _noop
        self.send: Callable[[bytes, bool], None] | None = None
        self._joined = False

    @staticmethod
    def target(path: str, query: str) -> tuple[str, str]:
        if "socket.io" not in path:
            path = path.rstrip("/") + "/socket.io/"
        return path, _with_query(query, "EIO=4&transport=websocket")

    def opened(self, send: Callable[[bytes, bool], None]) -> None:
        self.send = send
        self._joined = False

    def closed(self) -> None:
        self.send = None
        self._joined = False

    def ready(self) -> bool:
        return self._joined

    def raw_states(self) -> dict[str, Any]:
        return dict(self.chans)

    def states(self) -> dict[str, Any]:
        return {name: unpack_jobs(jobs) for name, jobs in self.chans.items()}

    def message(self, opcode: int, payload: bytes | bytearray, now: float) -> None:
        if not payload or self.send is None:
            return
        kind = payload[0]
        if kind == 0x34:  # "4": a Socket.IO packet
            sub = payload[1] if len(payload) > 1 else -1
            if sub == 0x32:  # "2": an event
                self._event(payload, now)
            elif sub == 0x30:  # "0": connected to the namespace: join the rooms
                for name in self.chans:
                    self.send(b'42["join",' + _json_encode(name) + b"]", False)
                self._joined = True
                self.notify()
            elif sub == 0x34:  # "4": connect error
                self.stats.count(self.stats.errors, "connect_error")
            elif sub == 0x31:  # "1": disconnected from the namespace
                self.stats.count(self.stats.errors, "disconnect")
            else:
                self.stats.unknown += 1
        elif kind == 0x32:  # "2": Engine.IO ping
            self.stats.server_pings += 1
            self.send(b"3" + bytes(payload[1:]), False)
        elif kind == 0x30:  # "0": Engine.IO open: connect to the default namespace
            self.send(b"40", False)
        elif kind in (0x33, 0x36):  # pong, noop
            pass
        elif kind == 0x31:  # close
            self.stats.count(self.stats.errors, "engine_close")
        else:
            self.stats.unknown += 1

    def _event(self, payload: bytes | bytearray, now: float) -> None:
        start = 2
        n = len(payload)
        if start < n and payload[start] == 0x2F:  # "/nsp," prefix
            comma = payload.find(b",", start)
            start = comma + 1 if comma >= 0 else n
        while start < n and 0x30 <= payload[start] <= 0x39:  # ack id
            start += 1
        body = memoryview(payload)[start:]
        try:
            name, data = _sio_event(body)
        except msgspec.ValidationError:
            try:
                _sio_any(body)
            except msgspec.DecodeError:
                self.stats.decode_errors += 1
            else:
                self.stats.unknown += 1  # another event, or a payload of another shape
            return
        except msgspec.DecodeError:
            self.stats.decode_errors += 1
            return
        finally:
            body.release()
        if name != "job":
            self.stats.unknown += 1
            return
        changes = data if isinstance(data, list) else (data,)
        chans = self.chans
        for c in changes:
            jobs = chans.get(c.channel) if c.channel is not None else None
            if jobs is None:
                self.stats.foreign += 1
                continue
            _apply_changes(jobs, (c,), now, self.stats)


Dialect = GatewayDialect | PlainDialect | SocketIODialect
DIALECTS = ("gateway", "gateway-msgpack", "plain", "socketio")


def make_dialect(name: str, channels: Sequence[str], stats: Stats) -> Dialect:
    if name == "gateway":
        return GatewayDialect(channels, stats)
    if name == "gateway-msgpack":
        return GatewayDialect(channels, stats, fmt="msgpack")
    if name == "plain":
        return PlainDialect(channels, stats)
    if name == "socketio":
        return SocketIODialect(channels, stats)
    raise ValueError(f"unknown dialect {name!r}: one of {', '.join(DIALECTS)}")


# ---------------------------------------------------------------------------------------------------------
# The websocket client protocol


def mask_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """One client frame: masked with a random key, as RFC 6455 requires of clients."""
    n = len(payload)
    first = (0x80 if fin else 0) | opcode
    if n < 126:
        head = bytes((first, 0x80 | n))
    elif n < 1 << 16:
        head = bytes((first, 0x80 | 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((first, 0x80 | 127)) + n.to_bytes(8, "big")
    key = random.getrandbits(32).to_bytes(4, "big")
    if not n:
        return head + key
    masked = (
        int.from_bytes(payload, "big") ^ int.from_bytes(key * ((n + 3) >> 2), "big") >> (((-n) & 3) << 3)
    ).to_bytes(n, "big")
    return head + key + masked


def unmask(payload: bytes | bytearray, key: bytes | bytearray) -> bytes:
    n = len(payload)
    if not n:
        return b""
    return (
        int.from_bytes(payload, "big") ^ int.from_bytes(bytes(key) * ((n + 3) >> 2), "big") >> (((-n) & 3) << 3)
    ).to_bytes(n, "big")


def accept_key(key: bytes) -> bytes:
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


def request_head(host: str, port: int, target: str, headers: Iterable[str] = ()) -> bytes:
    """The upgrade request without its Sec-WebSocket-Key line and final blank line."""
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {host}:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Version: 13",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


def retry_delay(status: int, headers: Mapping[str, str], body: bytes) -> float | None:
    """The delay a refusal asks for: the gateway's `retry_after_ms` (already jittered), else Retry-After
    (seconds, jittered here), else None (the caller backs off by itself)."""
    if status != 503 and "retry-after" not in headers:
        return None
    try:
        ms = msgspec.json.decode(body).get("retry_after_ms")
        if isinstance(ms, (int, float)) and ms >= 0:
            return ms / 1000.0
    except (msgspec.DecodeError, AttributeError):
        pass
    try:
        return float(headers["retry-after"]) * random.uniform(0.5, 1.5)
    except (KeyError, ValueError):
        return None


class Handler(Protocol):
    """What a WSClient reports to (a Subscriber; tests use their own)."""

    stats: Stats

    def ws_open(self, proto: WSClient) -> None: ...
    def ws_message(self, opcode: int, payload: bytearray, now: float) -> None: ...
    def ws_closed(self, proto: WSClient, code: int) -> None: ...
    def ws_refused(self, proto: WSClient, status: int, headers: dict[str, str], body: bytes) -> None: ...
    def ws_failed(self, proto: WSClient, reason: str) -> None: ...


_HANDSHAKE, _OPEN, _BODY, _DONE = 0, 1, 2, 3


class WSClient(asyncio.Protocol):
    """One websocket connection: the upgrade, then incremental frame parsing from one bytearray.

    Data messages (text and binary, reassembled from continuation frames) go to ``handler.ws_message``
    with ``now`` = ``time.time()`` in ms when their last bytes arrived; pings are answered with a masked
    pong; a close frame is answered with a masked close and the transport closed.
    """

    __slots__ = (
        "handler",
        "stats",
        "transport",
        "buf",
        "key",
        "phase",
        "status",
        "resp_headers",
        "body_need",
        "frag",
        "frag_op",
        "frag_z",
        "close_code",
        "_head",
        "inflate",
        "_inflater",
    )

    def __init__(self, handler: Handler, head: bytes) -> None:
        self.handler = handler
        self.stats = handler.stats
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.key = base64.b64encode(random.getrandbits(128).to_bytes(16, "big"))
        self.phase = _HANDSHAKE
        self.status = 0
        self.resp_headers: dict[str, str] = {}
        self.body_need = -1
        self.frag: bytearray | None = None
        self.frag_op = 0
        self.frag_z = False  # the fragmented message is compressed
        self.inflate = 0  # permessage-deflate: 0 not negotiated, 1 a fresh context per message, 2 one per connection
        self._inflater: Any = None  # the connection's context (inflate == 2)
        self.close_code: int | None = None
        self._head = head

    @property
    def is_open(self) -> bool:
        return self.phase == _OPEN

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self._head + b"Sec-WebSocket-Key: " + self.key + b"\r\n\r\n")  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        phase, self.phase = self.phase, _DONE
        if phase == _OPEN:
            self.handler.ws_closed(self, self.close_code if self.close_code is not None else 1006)
        elif phase == _BODY:
            self.handler.ws_refused(self, self.status, self.resp_headers, bytes(self.buf))
        elif phase == _HANDSHAKE:
            self.handler.ws_failed(self, type(exc).__name__ if exc is not None else "eof")

    def data_received(self, data: bytes) -> None:
        self.stats.bytes += len(data)
        self.buf += data
        if self.phase != _OPEN and not self._handshake():
            return
        self._frames(time.time() * 1000.0)

    def eof_received(self) -> bool | None:
        return None  # close the transport

    # -- sending

    def send(self, data: bytes, binary: bool = False) -> None:
        if self.phase == _OPEN and self.transport is not None:
            self.transport.write(mask_frame(OP_BINARY if binary else OP_TEXT, data))

    def close(self, code: int = 1000) -> None:
        """A clean close: send the close frame and close (without waiting for the server's)."""
        if self.transport is None:
            return
        if self.phase == _OPEN:
            self.transport.write(mask_frame(OP_CLOSE, code.to_bytes(2, "big")))
        self.phase = _DONE
        self.transport.close()

    def abort(self) -> None:
        """Drop the connection abruptly (no close frame); no callback follows."""
        self.phase = _DONE
        if self.transport is not None:
            self.transport.abort()

    # -- receiving

    def _handshake(self) -> bool:
        buf = self.buf
        if self.phase == _HANDSHAKE:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    self._give_up("head_too_large")
                return False
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            del buf[: end + 4]
            try:
                status = int(lines[0].split(" ", 2)[1])
            except (IndexError, ValueError):
                self._give_up("bad_status_line")
                return False
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if status == 101:
                if headers.get("sec-websocket-accept", "").encode() != accept_key(self.key):
                    self._give_up("bad_accept")
                    return False
                extensions = headers.get("sec-websocket-extensions", "")
                if extensions.startswith("permessage-deflate"):
                    self.inflate = 1 if "server_no_context_takeover" in extensions else 2
                    self._inflater = zlib.decompressobj(-15) if self.inflate == 2 else None
                self.phase = _OPEN
                self.handler.ws_open(self)
                return self.phase == _OPEN
            self.status, self.resp_headers, self.phase = status, headers, _BODY
            try:
                self.body_need = int(headers.get("content-length", "-1"))
            except ValueError:
                self.body_need = -1
        if self.phase == _BODY and 0 <= self.body_need <= len(buf):
            self.phase = _DONE
            self.handler.ws_refused(self, self.status, self.resp_headers, bytes(buf[: self.body_need]))
            if self.transport is not None:
                self.transport.close()
        return False

    def _give_up(self, reason: str) -> None:
        self.phase = _DONE
        if self.transport is not None:
            self.transport.abort()
        self.handler.ws_failed(self, reason)

    def _fail(self, code: int) -> None:
        """A protocol error or an oversized message: close with `code` and report it."""
        self.stats.protocol_errors += 1
        self.close_code = code
        if self.transport is not None:
            self.transport.write(mask_frame(OP_CLOSE, code.to_bytes(2, "big")))
            self.transport.close()
        self.phase = _DONE
        self.handler.ws_closed(self, code)

    def _frames(self, now: float) -> None:
        buf = self.buf
        n = len(buf)
        pos = 0
        st = self.stats
        on_message = self.handler.ws_message
        while n - pos >= 2:
            b0 = buf[pos]
            b1 = buf[pos + 1]
            ln = b1 & 0x7F
            h = pos + 2
            if ln == 126:
                if n - h < 2:
                    break
                ln = (buf[h] << 8) | buf[h + 1]
                h += 2
            elif ln == 127:
                if n - h < 8:
                    break
                ln = int.from_bytes(buf[h : h + 8], "big")
                h += 8
            if ln > MAX_MESSAGE:
                del buf[:pos]
                self._fail(1009)
                return
            key = None
            if b1 & 0x80:  # servers must not mask; tolerate it
                if n - h < 4:
                    break
                key = buf[h : h + 4]
                h += 4
            end = h + ln
            if end > n:
                break
            payload = buf[h:end]
            pos = end
            st.frames += 1
            if key is not None:
                payload = bytearray(unmask(payload, key))
            op = b0 & 0x0F
            compressed = False
            if b0 & 0x70:  # RSV1 marks the first frame of a compressed message; nothing else is defined
                if b0 & 0x70 != 0x40 or not self.inflate or not (op == OP_TEXT or op == OP_BINARY):
                    del buf[:pos]
                    self._fail(1002)
                    return
                compressed = True
            if op >= 0x8:
                if op == OP_PING:
                    st.server_pings += 1
                    self.transport.write(mask_frame(OP_PONG, bytes(payload)))  # type: ignore[union-attr]
                elif op == OP_CLOSE:
                    code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                    self.close_code = code
                    self.transport.write(mask_frame(OP_CLOSE, bytes(payload[:2])))  # type: ignore[union-attr]
                    self.transport.close()  # type: ignore[union-attr]
                    self.phase = _DONE
                    del buf[:]
                    self.handler.ws_closed(self, code)
                    return
                elif op != OP_PONG:
                    del buf[:pos]
                    self._fail(1002)
                    return
                continue
            if op == OP_CONT:
                frag = self.frag
                if frag is None:
                    del buf[:pos]
                    self._fail(1002)
                    return
                frag += payload
                if len(frag) > MAX_MESSAGE:
                    del buf[:pos]
                    self._fail(1009)
                    return
                if not b0 & 0x80:
                    continue
                payload, op, compressed, self.frag = frag, self.frag_op, self.frag_z, None
            elif op == OP_TEXT or op == OP_BINARY:
                if self.frag is not None:
                    del buf[:pos]
                    self._fail(1002)
                    return
                if not b0 & 0x80:
                    self.frag, self.frag_op, self.frag_z = payload, op, compressed
                    continue
            else:
                del buf[:pos]
                self._fail(1002)
                return
            if compressed:
                inflater = self._inflater if self.inflate == 2 else zlib.decompressobj(-15)
                try:
                    payload = inflater.decompress(payload + _FLUSH_TAIL, MAX_MESSAGE + 1)
                except zlib.error:
                    del buf[:pos]
                    self._fail(1002)
                    return
                if len(payload) > MAX_MESSAGE:
                    del buf[:pos]
                    self._fail(1009)
                    return
            st.messages += 1
            on_message(op, payload, now)
            if self.phase != _OPEN:
                return
        if pos:
            del buf[:pos]


# ---------------------------------------------------------------------------------------------------------
# Subscribers and the worker process

INITIAL_BACKOFF = 0.25


class Subscriber:
    """One simulated client: reconnects by itself (jittered exponential backoff, or the delay a 503 asks
    for) and keeps its dialect's state and cursors across connections. Given several URLs (nodes behind a
    load balancer), it starts on the first and moves to the next when a connection attempt fails."""

    __slots__ = (
        "idx",
        "host",
        "port",
        "head",
        "addresses",
        "dialect",
        "stats",
        "proto",
        "connected",
        "live",
        "backoff",
        "timer",
        "worker",
    )

    def __init__(
        self,
        worker: _Worker | None,
        idx: int,
        url: str | Sequence[str],
        channels: Sequence[str],
        headers: Sequence[str],
        dialect: str,
        stats: Stats,
    ) -> None:
        self.idx = idx
        self.stats = stats
        self.dialect = make_dialect(dialect, channels, stats)
        self.addresses: list[tuple[str, int, bytes]] = []
        for address in [url] if isinstance(url, str) else url:
            parts = urlsplit(address)
            if parts.scheme not in ("ws", "http"):
                raise ValueError(f"{address}: only ws:// (or http://) URLs")
            host, port = parts.hostname or "127.0.0.1", parts.port or 80
            path, query = self.dialect.target(parts.path or "/", parts.query)
            target = path + ("?" + query if query else "")
            self.addresses.append((host, port, request_head(host, port, target, [*self.dialect.headers, *headers])))
        self.host, self.port, self.head = self.addresses[0]
        self.proto: WSClient | None = None
        self.connected = False
        self.live = False
        self.backoff = INITIAL_BACKOFF
        self.timer: asyncio.TimerHandle | None = None
        self.worker = worker
        self.dialect.notify = self.check_live

    def connect(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        w = self.worker
        assert w is not None
        if w.stopping:
            return
        proto = WSClient(self, self.head)
        self.proto = proto
        w.spawn(self._connect(proto))

    async def _connect(self, proto: WSClient) -> None:
        w = self.worker
        assert w is not None
        try:
            await w.loop.create_connection(lambda: proto, self.host, self.port)
        except OSError as exc:
            if proto is self.proto:
                self.ws_failed(proto, type(exc).__name__)
            return
        if proto is not self.proto:  # dropped (a storm, a stop) while connecting
            proto.abort()
        elif proto.phase == _HANDSHAKE:
            w.loop.call_later(w.handshake_timeout, self._handshake_timeout, proto)

    def _handshake_timeout(self, proto: WSClient) -> None:
        if proto is self.proto and proto.phase == _HANDSHAKE:
            proto.abort()
            self.ws_failed(proto, "timeout")

    def _retry(self, delay: float | None) -> None:
        w = self.worker
        if w is None or w.stopping:
            return
        if delay is None:
            delay = self.backoff * random.uniform(0.5, 1.5)
            self.backoff = min(self.backoff * 2, w.max_backoff)
        self.timer = w.loop.call_later(delay, self.connect)

    def _set_connected(self, up: bool) -> None:
        if up != self.connected:
            self.connected = up
            if self.worker is not None:
                self.worker.connected_changed(up)

    def check_live(self) -> None:
        up = self.connected and self.dialect.ready()
        if up != self.live:
            self.live = up
            if self.worker is not None:
                self.worker.live_changed(up)

    def drop(self) -> None:
        """Abruptly, without a close frame and without reconnecting (a storm reconnects explicitly)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        proto, self.proto = self.proto, None
        if proto is not None:
            proto.abort()
        self._down()

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        proto, self.proto = self.proto, None
        if proto is not None:
            proto.close()
        self._down()

    def _down(self) -> None:
        self.dialect.closed()
        self._set_connected(False)
        self.check_live()

    # -- Handler

    def ws_open(self, proto: WSClient) -> None:
        if proto is not self.proto:
            return
        self.stats.connects += 1
        self.backoff = INITIAL_BACKOFF
        self._set_connected(True)
        self.dialect.opened(proto.send)
        self.check_live()

    def ws_message(self, opcode: int, payload: bytearray, now: float) -> None:
        self.dialect.message(opcode, payload, now)

    def ws_closed(self, proto: WSClient, code: int) -> None:
        if proto is not self.proto:
            return
        self.proto = None
        self.stats.count(self.stats.closes, code)
        self._down()
        self._retry(None)

    def ws_refused(self, proto: WSClient, status: int, headers: dict[str, str], body: bytes) -> None:
        if proto is not self.proto:
            return
        self.proto = None
        self.stats.failed_connects += 1
        self.stats.count(self.stats.failures, str(status))
        self._retry(retry_delay(status, headers, body))

    def ws_failed(self, proto: WSClient, reason: str) -> None:
        if proto is not self.proto:
            return
        self.proto = None
        self.stats.failed_connects += 1
        self.stats.count(self.stats.failures, reason)
        if len(self.addresses) > 1:  # that node is gone: the next one
            at = self.addresses.index((self.host, self.port, self.head))
            self.host, self.port, self.head = self.addresses[(at + 1) % len(self.addresses)]
        self._retry(None)


@dataclass
class _Spec:
    dialect: str
    subscribers: list[tuple[int, str | list[str], list[str], list[str]]]  # (index, url(s), channels, header lines)
    connect_rate: float | None  # connections a second for this worker; None: all at once
    handshake_timeout: float
    max_backoff: float


def raise_nofile() -> int:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    except (ValueError, OSError):
        return soft


class _Worker:
    def __init__(self, conn: Any, spec: _Spec, loop: asyncio.AbstractEventLoop) -> None:
        self.conn = conn
        self.loop = loop
        self.stats = Stats()
        self.stopping = False
        self.handshake_timeout = spec.handshake_timeout
        self.max_backoff = spec.max_backoff
        self.connect_rate = spec.connect_rate
        self.subs = [
            Subscriber(self, idx, url, channels, headers, spec.dialect, self.stats)
            for idx, url, channels, headers in spec.subscribers
        ]
        self.n = len(self.subs)
        self.connected = 0
        self.live = 0
        self.all_live_at: float | None = None
        self.all_connected = asyncio.Event()
        self.all_live = asyncio.Event()
        if not self.n:
            self.all_connected.set()
            self.all_live.set()
        self.tasks: set[asyncio.Task] = set()
        self.done = loop.create_future()

    def spawn(self, coro: Any) -> None:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def connected_changed(self, up: bool) -> None:
        self.connected += 1 if up else -1
        if self.connected == self.n:
            self.all_connected.set()
        elif not up:
            self.all_connected.clear()

    def live_changed(self, up: bool) -> None:
        self.live += 1 if up else -1
        if self.live == self.n:
            self.all_live_at = time.time()
            self.all_live.set()
        elif not up:
            self.all_live.clear()

    def gauges(self) -> dict[str, int]:
        return {"subscribers": self.n, "connected": self.connected, "live": self.live}

    async def open_all(self) -> None:
        rate = self.connect_rate
        interval = 1.0 / rate if rate else 0.0
        start = time.monotonic()
        for i, sub in enumerate(self.subs):
            if self.stopping:
                return
            sub.connect()
            if interval:
                delay = start + (i + 1) * interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            elif i % 200 == 199:
                await asyncio.sleep(0)

    # -- the pipe

    def on_pipe(self) -> None:
        try:
            message = self.conn.recv()
        except (EOFError, OSError):  # the parent is gone
            self.loop.remove_reader(self.conn.fileno())
            self.finish()
            return
        self.spawn(self.handle(message))

    async def handle(self, message: tuple) -> None:
        command, *args = message
        try:
            result = await getattr(self, "cmd_" + command)(*args)
            reply: tuple = ("ok", result)
        except Exception:
            reply = ("err", f"worker {os.getpid()}: {traceback.format_exc()}")
        try:
            os.set_blocking(self.conn.fileno(), True)  # a big reply (a 40,000-job state) must go out whole
            self.conn.send(reply)
        except (OSError, EOFError):
            self.finish()
            return
        if command == "stop":
            self.finish()

    def finish(self) -> None:
        self.stopping = True
        if not self.done.done():
            self.done.set_result(None)

    # -- commands

    async def cmd_wait(self, what: str, timeout: float) -> dict[str, Any]:
        event = self.all_live if what == "live" else self.all_connected
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        return self.gauges()

    async def cmd_reset(self) -> None:
        self.stats.reset()

    async def cmd_stats(self) -> dict[str, Any]:
        return {**self.stats.export(), **self.gauges()}

    async def cmd_states(self) -> dict[str, Any]:
        groups: dict[str, list[list]] = {}
        not_live: dict[str, int] = {}
        for sub in self.subs:
            live = sub.live
            for name, state in sub.dialect.raw_states().items():
                if not live:
                    not_live[name] = not_live.get(name, 0) + 1
                found = groups.get(name)
                if found is None:
                    groups[name] = [[state, 1, [sub.idx]]]
                    continue
                for g in found:
                    if g[0] == state:
                        g[1] += 1
                        if len(g[2]) < 5:
                            g[2].append(sub.idx)
                        break
                else:
                    found.append([state, 1, [sub.idx]])
        out = {}
        for name, found in groups.items():
            # A gateway team channel's state is its counts (status -> n); every other state is packed jobs.
            out[name] = [
                (None if s is None else dict(s) if any(isinstance(key, str) for key in s) else unpack_jobs(s), k, ex)
                for s, k, ex in found
            ]
        return {"groups": out, "not_live": not_live}

    async def cmd_storm(self, timeout: float) -> dict[str, Any]:
        st = self.stats
        before = (st.failures.get("503", 0), st.failed_connects, st.connects, st.resyncs, st.snapshot_pages, st.gaps)
        self.all_live_at = None
        abort_at = time.time()
        for sub in self.subs:
            sub.drop()
        for sub in self.subs:
            sub.connect()
        try:
            await asyncio.wait_for(self.all_live.wait(), timeout)
        except TimeoutError:
            pass
        after = (st.failures.get("503", 0), st.failed_connects, st.connects, st.resyncs, st.snapshot_pages, st.gaps)
        d = [a - b for a, b in zip(after, before)]
        return {
            "abort_at": abort_at,
            "live_at": self.all_live_at if self.live == self.n else None,
            "http_503": d[0],
            "failed_connects": d[1],
            "connects": d[2],
            "resyncs": d[3],
            "snapshot_pages": d[4],
            "gaps": d[5],
            **self.gauges(),
        }

    async def cmd_until(self, marks: dict[str, tuple[str, Any, int]], timeout: float) -> float | None:
        """When (time.time()) every subscriber first showed the marks of its channels; None past `timeout`."""
        deadline = time.monotonic() + timeout
        while not all(sub.dialect.shows(marks) for sub in self.subs):  # type: ignore[union-attr]
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.01)
        return time.time()

    async def cmd_stop(self) -> dict[str, int]:
        self.stopping = True
        for sub in self.subs:
            sub.close()
        await asyncio.sleep(0.05)  # let the close frames go out
        return self.gauges()


async def _worker_async(conn: Any, spec: _Spec) -> None:
    loop = asyncio.get_running_loop()
    try:
        worker = _Worker(conn, spec, loop)
    except Exception:
        conn.send(("err", f"worker {os.getpid()}: {traceback.format_exc()}"))
        return
    loop.add_reader(conn.fileno(), worker.on_pipe)
    conn.send(("ok", {"pid": os.getpid(), "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0]}))
    worker.spawn(worker.open_all())
    await worker.done
    try:
        loop.remove_reader(conn.fileno())
    except (OSError, ValueError):
        pass
    for task in list(worker.tasks):
        task.cancel()
    await asyncio.gather(*worker.tasks, return_exceptions=True)


def _worker_main(conn: Any, spec: _Spec) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us (Ctrl-C reaches the whole group)
    raise_nofile()
    import uvloop

    uvloop.run(_worker_async(conn, spec))


# ---------------------------------------------------------------------------------------------------------
# The parent's side


@dataclass
class StateGroup:
    """Subscribers of one channel holding the same state."""

    state: Any  # {job_id: (version, status)}, or {status: count} for a gateway team channel (None: none yet)
    subscribers: int
    examples: list[int] = field(default_factory=list)  # some of their subscriber indices


@dataclass
class FleetStates:
    groups: dict[str, list[StateGroup]]  # channel -> distinct states, most common first
    not_live: dict[str, int]  # channel -> subscribers of it not live when asked


def compare_states(states: FleetStates, expected: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per channel of `expected`: subscribers holding exactly the expected state (`equal`) or not (`differ`),
    and for the most common wrong state how it differs (`missing`, `extra`, `wrong` job ids, a few each).
    `expected` has the same shape as the states: {job_id: (version, status)}, or {status: count}."""
    out: dict[str, dict[str, Any]] = {}
    for name, want in expected.items():
        groups = states.groups.get(name, [])
        equal = sum(g.subscribers for g in groups if g.state == want)
        bad = [g for g in groups if g.state != want]
        report: dict[str, Any] = {
            "subscribers": equal + sum(g.subscribers for g in bad),
            "equal": equal,
            "differ": sum(g.subscribers for g in bad),
            "not_live": states.not_live.get(name, 0),
        }
        if bad:
            worst = bad[0].state or {}
            want_d = want or {}
            report["missing"] = sorted(k for k in want_d if k not in worst)[:10]
            report["extra"] = sorted(k for k in worst if k not in want_d)[:10]
            report["wrong"] = [
                (k, worst[k], want_d[k]) for k in sorted(k for k in want_d if k in worst and worst[k] != want_d[k])
            ][:10]
            report["examples"] = bad[0].examples
        out[name] = report
    return out


def _per(value: Any, i: int) -> Any:
    return value(i) if callable(value) else value


def _header_lines(headers: Mapping[str, str] | None) -> list[str]:
    return [f"{k}: {v}" for k, v in (headers or {}).items()]


class Fleet:
    """`n` subscribers over `processes` worker processes (subscriber i lives in worker i % processes).

    url:      ``ws://host:port/...`` for all, or ``url(i)`` per subscriber (e.g. a token per user); a list
              of URLs: the first, then the next one each time a connection attempt fails (a killed node)
    dialect:  "gateway", "gateway-msgpack", "plain" or "socketio"
    channels: the channels of every subscriber, or ``channels(i)``
    headers:  extra handshake headers (``{"Authorization": "Bearer ..."}``), or ``headers(i)``
    connect_rate: new connections a second over the whole fleet at start (None: all at once);
              reconnects are paced by backoff and by the delays the server asks for (503).
    deflate:  offer permessage-deflate, as browsers do (see the module's docstring).

    Callables run in the parent only. Every method is a coroutine; one runs at a time.
    """

    def __init__(
        self,
        url: str | Callable[[int], str | list[str]],
        dialect: str,
        channels: Sequence[str] | Callable[[int], Sequence[str]],
        n: int,
        processes: int = 2,
        headers: Mapping[str, str] | Callable[[int], Mapping[str, str]] | None = None,
        connect_rate: float | None = None,
        handshake_timeout: float = 10.0,
        max_backoff: float = 5.0,
        deflate: bool = False,
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}: one of {', '.join(DIALECTS)}")
        self.n = n
        self.processes = max(1, min(processes, n)) if n else 1
        shares: list[list[tuple[int, str | list[str], list[str], list[str]]]] = [[] for _ in range(self.processes)]
        for i in range(n):
            address = _per(url, i)
            for one in [address] if isinstance(address, str) else address:
                if urlsplit(one).scheme not in ("ws", "http"):
                    raise ValueError(f"subscriber {i}: {one!r}: only ws:// (or http://) URLs")
            lines = _header_lines(_per(headers, i)) + ([DEFLATE_OFFER] if deflate else [])
            shares[i % self.processes].append((i, address, list(_per(channels, i)), lines))
        rate = connect_rate / self.processes if connect_rate else None
        self._specs = [_Spec(dialect, share, rate, handshake_timeout, max_backoff) for share in shares]
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._lock: asyncio.Lock | None = None
        self.info: list[dict[str, Any]] = []  # per worker: pid, nofile

    @property
    def pids(self) -> list[int]:
        """The worker processes (for procstat: what the harness itself costs)."""
        return [p.pid for p in self._procs if p.pid is not None]

    async def __aenter__(self) -> Fleet:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Spawn the workers; each starts opening its connections at once. Returns when all are running."""
        ctx = multiprocessing.get_context("spawn")
        for spec in self._specs:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker_main, args=(child, spec), daemon=True, name="bench-subscribers")
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)
        try:
            self.info = await asyncio.to_thread(self._receive_all)
        except RuntimeError:
            await asyncio.to_thread(self._join, True)
            raise

    async def wait_connected(self, timeout: float) -> dict[str, Any]:
        """Wait until every subscriber's handshake is done (or `timeout`): {subscribers, connected, live, ok, elapsed}."""
        return await self._wait("connected", timeout)

    async def wait_live(self, timeout: float) -> dict[str, Any]:
        """Wait until every subscriber is live (gateway: final snapshot pages and its pong): as wait_connected."""
        return await self._wait("live", timeout)

    async def reset_stats(self) -> None:
        """Zero every counter and histogram (the start of a measured phase). State and connections stay."""
        await self._call("reset")

    async def stats(self) -> dict[str, Any]:
        """Merged counters and gauges; ``latency_ms``/``summary_latency_ms`` summaries (p50, p99, max...);
        the raw Histograms as ``latency``/``summary_latency``; ``elapsed`` seconds since the last reset."""
        merged = merge_stats(await self._call("stats"))
        merged["latency_ms"] = merged["latency"].summary()
        merged["summary_latency_ms"] = merged["summary_latency"].summary()
        merged["elapsed"] = time.time() - merged.pop("since")
        return merged

    async def states(self) -> FleetStates:
        """Every subscriber's state, grouped per channel into distinct states with how many hold each
        (call it once the load has stopped and the stream settled); check with :func:`compare_states`."""
        merged: dict[str, list[StateGroup]] = {}
        not_live: dict[str, int] = {}
        for part in await self._call("states"):
            for name, k in part["not_live"].items():
                not_live[name] = not_live.get(name, 0) + k
            for name, found in part["groups"].items():
                groups = merged.setdefault(name, [])
                for state, k, examples in found:
                    for g in groups:
                        if g.state == state:
                            g.subscribers += k
                            g.examples = (g.examples + examples)[:5]
                            break
                    else:
                        groups.append(StateGroup(state, k, examples))
        for groups in merged.values():
            groups.sort(key=lambda g: -g.subscribers)
        return FleetStates(merged, not_live)

    async def storm(self, timeout: float = 60.0) -> dict[str, Any]:
        """Drop every connection abruptly and reconnect them all at once (gateway: with their cursors).
        ``recovery_s``: from the first drop until every subscriber was live again (None past `timeout`);
        ``http_503``, ``resyncs``, ``snapshot_pages``, ``connects``, ``failed_connects``, ``gaps`` during it."""
        parts = await self._call("storm", timeout)
        out = merge_stats({k: v for k, v in p.items() if k not in ("abort_at", "live_at")} for p in parts)
        done = [p["live_at"] for p in parts]
        start = min(p["abort_at"] for p in parts)
        out["recovery_s"] = max(done) - start if all(t is not None for t in done) else None
        return out

    async def until(self, marks: dict[str, tuple[str, Any, int]], timeout: float = 60.0) -> float | None:
        """Gateway dialects: when (time.time()) every subscriber held the marks of its channels (see
        GatewayDialect.shows), e.g. a change committed just after a fault; None if some did not within `timeout`."""
        done = await self._call("until", marks, timeout)
        return None if any(t is None for t in done) else max(done)

    async def stop(self) -> None:
        """Close every connection (close frame 1000) and end the workers."""
        if not self._procs:
            return
        try:
            await self._call("stop")
        except (RuntimeError, OSError):
            pass
        await asyncio.to_thread(self._join)

    # -- plumbing

    def _join(self, kill: bool = False) -> None:
        for proc in self._procs:
            if kill:
                proc.terminate()
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
        for conn in self._conns:
            conn.close()
        self._procs, self._conns = [], []

    async def _wait(self, what: str, timeout: float) -> dict[str, Any]:
        start = time.monotonic()
        merged = merge_stats(await self._call("wait", what, timeout))
        merged["ok"] = merged[what] == self.n
        merged["elapsed"] = time.monotonic() - start
        return merged

    async def _call(self, *message: Any) -> list[Any]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await asyncio.to_thread(self._roundtrip, message)

    def _roundtrip(self, message: tuple) -> list[Any]:
        if not self._conns:
            raise RuntimeError("the fleet is not running")
        for conn in self._conns:
            conn.send(message)
        return self._receive_all()

    def _receive_all(self) -> list[Any]:
        out = []
        for proc, conn in zip(self._procs, self._conns):
            try:
                kind, payload = conn.recv()
            except EOFError:
                raise RuntimeError(f"subscriber worker {proc.pid} died (exit code {proc.exitcode})") from None
            if kind == "err":
                raise RuntimeError(payload)
            out.append(payload)
        return out
