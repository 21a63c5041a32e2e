"""What one worker process's subscribers counted (shared by all of them), and how workers' counts merge."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from .latency import Histogram

MAX_GAP_SAMPLES = 20


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
    __slots__ = COUNTERS + (
        "closes", "errors", "failures", "hints", "gap_samples", "duplicate_samples", "latency", "summary_latency",
        "since",
    )  # fmt: skip
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
        self.hints: dict[int, int] = {}  # a restarting node's retry hint (ms, in its 1012 close) -> count
        self.gap_samples: list[tuple[float, str, int, int]] = []  # the first gaps: (time, channel, seq held, seq got)
        self.duplicate_samples: list[tuple[float, str, int, int]] = []  # the first duplicates, the same way
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
            hints=dict(self.hints),
            gap_samples=list(self.gap_samples),
            duplicate_samples=list(self.duplicate_samples),
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
