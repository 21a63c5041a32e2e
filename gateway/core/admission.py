"""Which new websockets a node takes, without I/O and without a clock (the caller passes the time).

A reconnect storm brings every client of a node back in the same second. Each handshake costs the node about half
a millisecond of CPU, then its subscriptions resume; taken as fast as they come, they keep the event loop busy
for seconds at a time, and everything else the node does waits behind them: live frames, pings, `/healthz`
(which a load balancer reads as a dead node). So a node takes new connections:

- at most `rate` a second (GATEWAY_ADMISSION_RATE), in bursts of a twentieth of a second's worth, so one turn
  of the event loop never holds a second's handshakes;
- fewer while its event loop runs late: the node measures how late a short timer fires (`observe_lag`); past
  `LAG_LIMIT` the rate halves (at most once per `BACKOFF_EVERY`), and while the loop is on time it climbs back
  by a fiftieth of `rate` each observation. The classic additive increase, multiplicative decrease: the node
  settles at what it can take while still answering promptly, whatever the machine;
- and the ones turned away hear when to come back (`retry_after_ms`): spread over as many seconds as the
  crowd refused in the last second needs at `rate`, so that they do not all come back together again;
- fairly (`admit`): one source (a signed-in user: the node reads the token before it asks here, and refuses
  an upgrade without a valid one before it spends anything) takes at most `share` of `rate` a second, in
  bursts of a second's worth. What a source asks past its share is refused without touching the node's
  bucket and without counting in the crowd the hints are spread for: one source can neither spend the
  node's admission nor lengthen everyone else's wait.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from .ratelimit import KeyedRate, TokenBucket

LAG_LIMIT = 0.05  # seconds late past which the loop counts as overloaded
ON_TIME = LAG_LIMIT / 3  # late by less than this: room for more
BACKOFF_EVERY = 0.2  # the rate halves at most this often (one overload shows in several observations)
BURST_SECONDS = 0.05  # the bucket holds this many seconds' worth of connections
LEAST_RATE = 10.0  # never below this many a second: a node that admits nobody looks dead
CLIMB = 0.02  # of `rate`, added back at each observation while the loop is on time
RETRY_LEAST_MS = 250
RETRY_LONGEST_MS = 60_000
LEAST_SHARE_RATE = 1.0  # a source may always open this many a second


class Admission:
    """The handshake's gate: `allow(now)` for each new websocket, `observe_lag(late, now)` from a timer."""

    __slots__ = (
        "rate",
        "current",
        "bucket",
        "shares",
        "backed_off_at",
        "refused",
        "refused_since",
        "refused_total",
    )

    def __init__(self, rate: float, share: float = 1.0) -> None:
        if rate <= 0:
            raise ValueError("the admission rate must be positive")
        if not 0 < share <= 1:
            raise ValueError("a source's share of the admission rate must be in (0, 1]")
        self.rate = rate
        share_rate = max(LEAST_SHARE_RATE, rate * share)
        # Each source's bucket, a second's worth deep; none when one source may take the whole rate.
        self.shares = KeyedRate(share_rate, share_rate) if share < 1 else None
        self.current = rate
        self.bucket = TokenBucket(rate, _burst(rate))
        self.backed_off_at = float("-inf")
        self.refused = 0  # turned away since `refused_since`, and in the second before it (halved)
        self.refused_since = 0.0
        self.refused_total = 0

    def admit(self, now: float, draw: float, source: Hashable = None) -> int | None:
        """None when this new websocket of `source` may go ahead, else the `retry_after_ms` to tell it; `draw`
        a uniform number in [0, 1) that jitters the hint."""
        shares = self.shares
        if shares is not None and source is not None and shares.wait(source, now):
            self.refused_total += 1  # past its own share: the node's bucket and the crowd's count are not touched
            return int(RETRY_LEAST_MS + max(1000.0, 1000.0 / shares.rate) * draw)
        if self.allow(now):
            return None
        return self.retry_after_ms(lambda: draw)

    def allow(self, now: float) -> bool:
        """The node's bucket alone (every source's share aside)."""
        if self.bucket.allow(now):
            return True
        self._count_refusal(now)
        self.refused_total += 1
        return False

    def observe_lag(self, late: float, now: float) -> None:
        """The event loop ran `late` seconds behind a timer that should have fired at `now - late`."""
        if late > LAG_LIMIT:
            if now - self.backed_off_at >= BACKOFF_EVERY:
                self.backed_off_at = now
                self._set(max(LEAST_RATE, self.current / 2), now)
        elif late < ON_TIME and self.current < self.rate:
            self._set(min(self.rate, self.current + CLIMB * self.rate), now)

    def retry_after_ms(self, draw: Callable[[], float]) -> int:
        """When a client turned away should come back: jittered over the time the crowd refused lately needs at
        `rate` (at least a second), `draw()` a uniform number in [0, 1)."""
        # At the configured rate, not the current one: halved for a moment by a late loop, the rate soon climbs
        # back, and a crowd told to wait for the lowest rate would come back long after the node could take it.
        # Those who come back too soon are turned away again, which costs the node little.
        spread = max(1000.0, 1000.0 * self.refused / self.rate)
        return int(min(RETRY_LONGEST_MS, RETRY_LEAST_MS + spread * draw()))

    def _set(self, rate: float, now: float) -> None:
        self.bucket.allow(now, 0)  # the tokens earned so far, at the old rate
        self.current = rate
        self.bucket.rate = rate
        self.bucket.burst = _burst(rate)
        self.bucket.tokens = min(self.bucket.tokens, self.bucket.burst)

    def _count_refusal(self, now: float) -> None:
        if now - self.refused_since >= 1.0:  # a new second: what the last one refused counts half
            self.refused = self.refused // 2 if now - self.refused_since < 2.0 else 0
            self.refused_since = now
        self.refused += 1


def _burst(rate: float) -> float:
    return max(1.0, rate * BURST_SECONDS)
