"""What a Redis would hold for the gateway, in plain dicts, with a clock for expiry.

Each field mirrors a family of keys in gateway.bus.keys. `down` stands for a bus that cannot be reached:
every command then fails as on a lost Redis connection (`BusUnavailable`), so the code under test takes the same
error paths. `full` stands for a Redis out of memory (`maxmemory` with `noeviction`): what would grow its memory
is refused (`BusRefused`), while reads, publishing to subscribers and deletions go on. `clear()` is a Redis that restarted empty; `copy()` and `restore()` a
replica that stopped receiving, then promoted.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import BusRefused, BusUnavailable
from ..history import Entry

Position = tuple[int, int]
ChannelKey = tuple[str, str]  # (tag, channel)


@dataclass
class Stream:
    """A channel's history: its kept entries and their bytes, the newest seq it took (trimming keeps it), when it
    expires."""

    entries: deque[Entry] = field(default_factory=deque)
    size: int = 0
    last_seq: int = 0
    expires: float = 0.0


@dataclass
class Expiring:
    """A hash with a time to live (a relay's figures)."""

    value: dict[bytes, bytes]
    expires: float


class Keyspace:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.down = False
        self.full = False
        self.clear()

    def clear(self) -> None:
        """Forget everything, as a Redis that restarted without its data."""
        self.fences: dict[str, int] = {}  # keys.epoch
        self.cursors: dict[str, str] = {}  # keys.relay_cursor
        self.positions: dict[ChannelKey, Position] = {}  # keys.seq
        self.streams: dict[ChannelKey, Stream] = {}  # keys.history
        self.states: dict[ChannelKey, dict[bytes, bytes]] = {}  # keys.state
        self.markers: dict[str, float] = {}  # keys.finish_marker -> when it expires
        self.presence: dict[int, dict[str, float]] = {}  # keys.presence: "<user>:<node>" -> when it expires
        self.presence_teams: set[int] = set()  # keys.PRESENCE_TEAMS
        self.user_sockets: dict[int, dict[str, tuple[int, float]]] = {}  # keys.user_sockets: process -> record
        self.figures: dict[int, dict[int, bytes]] = {}  # keys.metrics: cluster id -> MessagePack figures
        self.figure_teams: set[int] = set()  # keys.METRICS_TEAMS
        self.relay_stats: dict[str, Expiring] = {}  # keys.relay_stats
        self.replies: dict[str, tuple[list[bytes], float]] = {}  # keys.reply: confirmations nobody took yet

    def copy(self) -> dict[str, object]:
        """The data as it is now (what a replica holds when it stops receiving): `restore()` makes it the data."""
        return copy.deepcopy({k: v for k, v in vars(self).items() if k not in ("clock", "down", "full")})

    def restore(self, data: dict[str, object]) -> None:
        vars(self).update(copy.deepcopy(data))

    def reachable(self) -> None:
        """Every command starts here: a bus that is down fails it."""
        if self.down:
            raise BusUnavailable("the memory bus is down")

    def writable(self) -> None:
        """A write that may grow memory checks here, after whatever a Redis checks before its first write."""
        self.reachable()
        if self.full:
            raise BusRefused("OutOfMemoryError: command not allowed when used memory > 'maxmemory'.")

    def alive(self, expires: float) -> bool:
        return self.clock() < expires

    def keep_reply(self, key: str, confirmation: bytes, ttl: float) -> None:
        kept = self.replies.get(key)
        confirmations = kept[0] if kept is not None and self.alive(kept[1]) else []
        self.replies[key] = ([*confirmations, confirmation], self.clock() + ttl)

    def take_replies(self, key: str) -> list[bytes]:
        kept = self.replies.pop(key, None)
        return kept[0] if kept is not None and self.alive(kept[1]) else []

    def stream(self, key: ChannelKey) -> Stream | None:
        """The channel's history unless it expired (then it is gone, as an expired key)."""
        stream = self.streams.get(key)
        if stream is not None and not self.alive(stream.expires):
            del self.streams[key]
            return None
        return stream

    def append(self, key: ChannelKey, entry: Entry, length: int, size: int, ttl: float) -> None:
        """XADD with the entry's seq as its id, the oldest trimmed while more than `length` entries or `size`
        bytes are kept (never the newest), expiring `ttl` seconds from now."""
        stream = self.stream(key)
        if stream is None or entry.seq <= stream.last_seq:
            # A seq at or below the newest: the positions were lost while the history was kept. Start again.
            stream = self.streams[key] = Stream()
        stream.entries.append(entry)
        stream.size += len(entry.msgpack)
        stream.last_seq = entry.seq
        while len(stream.entries) > 1 and (len(stream.entries) > length or stream.size > size):
            stream.size -= len(stream.entries.popleft().msgpack)
        stream.expires = self.clock() + ttl
