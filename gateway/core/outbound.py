"""A connection's pending output: references to shared frames, bounded in bytes.

A broadcast never waits for the slowest subscriber. When a live frame would take a connection's pending bytes
past the bound, the frame is not queued: the connection `LAG`s, its channels hold their frames (bounded too)
and it gets what it missed from the channels' history once it has drained; what it already has pending stays.
A connection that passes the bound again after it was told to resync (the history no longer reached back),
before it has drained once, cannot keep up and is closed. Frames for this connection alone (snapshot pages,
replays, errors) are `forced`: they do not count against the live bound, because their senders wait for the
connection to drain between pages instead, so a big snapshot never trips the slow-consumer bound.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Sized


class Verdict(enum.Enum):
    QUEUED = "queued"
    LAG = "lag"  # not queued: the adapter holds the channels and catches them up from history once drained
    CLOSE = "close"  # resynced and still cannot drain: the adapter closes with CLOSE_SLOW


class Outbound:
    __slots__ = ("limit", "frames", "size", "live_size", "resyncing")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.frames: deque[tuple[Sized, bool]] | None = None  # made on first use: most connections keep up
        self.size = 0  # every pending byte
        self.live_size = 0  # pending bytes of shared live frames: what the bound applies to
        self.resyncing = False  # told to resync as a slow consumer and not drained since

    def push(self, frame: Sized, force: bool = False) -> Verdict:
        # An empty queue takes any one frame, so a frame larger than the bound cannot loop on lags.
        if not force and self.live_size and self.live_size + len(frame) > self.limit:
            return Verdict.CLOSE if self.resyncing else Verdict.LAG
        if self.frames is None:
            self.frames = deque()
        self.frames.append((frame, force))
        self.size += len(frame)
        if not force:
            self.live_size += len(frame)
        return Verdict.QUEUED

    def pop(self) -> Sized | None:
        if not self.frames:
            self.resyncing = False
            self.frames = None
            return None
        frame, forced = self.frames.popleft()
        self.size -= len(frame)
        if not forced:
            self.live_size -= len(frame)
        return frame

    def __len__(self) -> int:
        return len(self.frames) if self.frames is not None else 0
