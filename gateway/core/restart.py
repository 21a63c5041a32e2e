"""A node's goodbye when it restarts: close code 1012 with a retry hint in the close reason, spread over a window.

Every connection of a stopping node hears the same news at the same instant; were they all to come back at once,
the nodes that remain would take the whole crowd in the same second (and refuse most of it with 503). So each
connection is told its own delay, `retry_after_ms=<n>` in the close reason (docs/protocol.md, "Close codes"):
the delays divide the window into as many equal slots as there are connections and take one random point in
each, so they are all different and evenly spread. No clock and no I/O here: the caller gives the count, the
window and the random numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

RESTART_CODE = 1012  # RFC 6455 7.4.1: "Service Restart"
RESTART_REASON = "server restarting: connect again"
_HINT = re.compile(r"(?:^|[\s;,(])retry_after_ms=(\d{1,9})(?:$|[\s;,)])")


def restart_reason(retry_after_ms: int) -> str:
    """The close reason of a restart with its retry hint (well under a close reason's 123 bytes)."""
    return f"{RESTART_REASON}; retry_after_ms={retry_after_ms}"


def retry_after_ms(reason: str) -> int | None:
    """The retry hint a close reason carries (`retry_after_ms=<digits>` as a word of its own), else None."""
    found = _HINT.search(reason)
    return int(found.group(1)) if found else None


def spread(connections: int, window: float, random: Callable[[], float]) -> list[int]:
    """One delay in milliseconds per connection: a random point in each of `connections` equal slots of `window`
    seconds, in a random order (the caller's connections are in the order they came; the first to come need
    not be the first to go back). `random()` returns a float in [0, 1)."""
    if connections <= 0:
        return []
    slot = max(window, 0.0) * 1000 / connections
    delays = [int((i + random()) * slot) for i in range(connections)]
    for i in range(connections - 1, 0, -1):  # Fisher-Yates with the caller's random numbers
        j = int(random() * (i + 1))
        delays[i], delays[j] = delays[j], delays[i]
    return delays


def spread_window(connections: int, rate: float, longest: float) -> float:
    """Seconds to spread `connections` reconnects over so that they come back at `rate` a second at most, but
    never longer than `longest` (past that, the nodes' admission control paces the rest)."""
    if rate <= 0:
        return longest
    return min(longest, connections / rate)
