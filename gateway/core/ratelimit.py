"""Rate and concurrency limits, pure: a token bucket (at most `rate` events a second on average, bursts of
`burst`; the caller passes the time) and a count of things in flight per key."""

from __future__ import annotations

import math


class TokenBucket:
    __slots__ = ("rate", "burst", "tokens", "at")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst
        self.at: float | None = None

    def allow(self, now: float, count: float = 1) -> bool:
        """Take `count` tokens, all or none."""
        if self.at is not None:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= count:
            self.tokens -= count
            return True
        return False


class Concurrency:
    """At most `limit` things in flight per key (a user's or a team's actions); keys with none in flight are
    forgotten, so memory follows what is in flight."""

    __slots__ = ("limit", "in_flight")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight: dict[object, int] = {}

    def acquire(self, key: object) -> bool:
        count = self.in_flight.get(key, 0)
        if count >= self.limit:
            return False
        self.in_flight[key] = count + 1
        return True

    def release(self, key: object) -> None:
        count = self.in_flight.pop(key, 0) - 1
        if count > 0:
            self.in_flight[key] = count


class KeyedRate:
    """A token bucket per key (a user, a cluster), made on first use. A bucket idle long enough to have refilled
    is no different from a new one, so it is dropped: memory follows the keys active lately."""

    __slots__ = ("rate", "burst", "buckets", "_sweep_at")

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self.buckets: dict[object, TokenBucket] = {}
        self._sweep_at = 1024

    def wait(self, key: object, now: float, count: float = 1) -> float:
        """0 when `count` events may go ahead (and counts them), else the seconds until they may (infinite past
        the burst: never all at once)."""
        bucket = self.buckets.get(key)
        if bucket is None:
            if len(self.buckets) >= self._sweep_at:
                self._sweep(now)
            bucket = self.buckets[key] = TokenBucket(self.rate, self.burst)
        if bucket.allow(now, count):
            return 0.0
        if count > self.burst:
            return math.inf
        return (count - bucket.tokens) / self.rate

    def give_back(self, key: object, count: float) -> None:
        """Events counted that did not happen after all (the write they were for failed)."""
        bucket = self.buckets.get(key)
        if bucket is not None:
            bucket.tokens = min(bucket.burst, bucket.tokens + count)

    def _sweep(self, now: float) -> None:
        refilled = self.burst / self.rate
        self.buckets = {k: b for k, b in self.buckets.items() if b.at is not None and now - b.at < refilled}
        self._sweep_at = max(1024, 2 * len(self.buckets))  # sweeps stay rare however many keys are active


class FrameBudget:
    """What one websocket client may send, every frame of it: pings, pongs, continuations and messages alike cost
    a frame, and every byte counts, at `frame_rate` frames and `byte_rate` bytes a second on average, in bursts
    of `BURST_SECONDS` seconds' worth. Reading a frame costs the node whatever its payload: a flood of empty pongs
    must run out as surely as a flood of messages."""

    BURST_SECONDS = 4.0

    __slots__ = ("frame_rate", "byte_rate", "frame_burst", "byte_burst", "frames", "bytes", "at")

    def __init__(self, frame_rate: float, byte_rate: float, min_byte_burst: float = 0.0) -> None:
        self.frame_rate = frame_rate
        self.byte_rate = byte_rate
        self.frame_burst = frame_rate * self.BURST_SECONDS
        self.byte_burst = max(byte_rate * self.BURST_SECONDS, min_byte_burst)  # room for the largest message
        self.frames = self.frame_burst
        self.bytes = self.byte_burst
        self.at: float | None = None

    def refill(self, now: float) -> None:
        if self.at is not None:
            elapsed = now - self.at
            self.frames = min(self.frame_burst, self.frames + elapsed * self.frame_rate)
            self.bytes = min(self.byte_burst, self.bytes + elapsed * self.byte_rate)
        self.at = now

    def take_bytes(self, count: int, now: float) -> bool:
        """Whether `count` more bytes fit (they are counted either way); refills first."""
        self.refill(now)
        self.bytes -= count
        return self.bytes >= 0

    def take_frames(self, count: int) -> None:
        self.frames -= count
