"""The node's fan-out: which local connections follow which channel, fed by one bus subscription.

A channel's message arrives once from Redis and is written to every local subscriber as the same object:
one decode of the envelope header, one str for JSON subscribers, no per-subscriber encoding.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..core import envelope
from ..core.sequence import Arrival, ChannelStream
from .connection import Connection

log = logging.getLogger(__name__)


class Hub:
    def __init__(self, on_empty: Callable[[str], None] = lambda channel: None) -> None:
        self.on_empty = on_empty  # a channel lost its last local subscriber: the adapter unsubscribes
        self.subscribers: dict[str, set[Connection]] = {}
        self.streams: dict[str, ChannelStream] = {}
        self.frames_out = 0
        self.gaps = 0

    def add(self, conn: Connection, channel: str) -> bool:
        """Add a local subscriber; True when it is the channel's first (subscribe in Redis then)."""
        subs = self.subscribers.get(channel)
        first = subs is None
        if subs is None:
            subs = self.subscribers[channel] = set()
            self.streams[channel] = ChannelStream()
        subs.add(conn)
        return first

    def remove(self, conn: Connection, channel: str) -> bool:
        """Remove a local subscriber; True when none is left (unsubscribe in Redis then)."""
        subs = self.subscribers.get(channel)
        if subs is None:
            return False
        subs.discard(conn)
        if subs:
            return False
        del self.subscribers[channel]
        self.streams.pop(channel, None)
        self.on_empty(channel)
        return True

    def on_message(self, channel: str, data: bytes) -> None:
        subs = self.subscribers.get(channel)
        if not subs:
            return
        try:
            env = envelope.unpack(data)
        except Exception:  # a foreign publisher on our prefix must not stop the node
            log.warning("dropped an undecodable bus message on %s", channel)
            return
        arrival = self.streams[channel].arrive(env.epoch, env.seq)
        if arrival is Arrival.DUPLICATE or arrival is Arrival.STALE_EPOCH:
            return
        if arrival is Arrival.GAP:
            self.gaps += 1
            log.warning("gap on %s before seq %d: resync %d subscriber(s)", channel, env.seq, len(subs))
            self._resync(channel, "gap")
            return
        text: str | None = None
        for conn in tuple(subs):
            if conn.format == "json":
                if text is None:
                    text = env.json.decode()
                conn.deliver(channel, env.seq, text)
            else:
                conn.deliver(channel, env.seq, env.msgpack)
        self.frames_out += len(subs)

    def on_bus_lost(self) -> None:
        """The bus connection dropped: anything may have been missed, so every subscriber reloads."""
        for channel in list(self.subscribers):
            self._resync(channel, "bus_reconnected")

    def _resync(self, channel: str, reason: str) -> None:
        for conn in tuple(self.subscribers.get(channel, ())):
            conn.resync(channel, reason)
            self.remove(conn, channel)
