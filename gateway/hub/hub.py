"""The node's fan-out: which local connections follow which channel, fed by one bus subscription.

A channel's message arrives once from Redis and is written to every local subscriber as the same object:
one decode of the envelope header, one frame per wire format, no per-subscriber encoding; for subscribers
that negotiated compression, one deflate per format (and window size), the same compressed bytes for all.

Redis pub/sub drops messages silently (reconnects, output-buffer limits). A message whose sequence does not
follow the last one delivered opens a repair: newer messages wait while the adapter fetches the missing
ones from the channel's history; when the history no longer has them, the subscribers are told to resync.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ..core import envelope
from ..core.envelope import Envelope, message_frame
from ..core.protocol import Format
from ..core.sequence import Arrival, ChannelStream
from ..core.wsframe import Frame
from .connection import WIRE_KINDS, Connection

log = logging.getLogger(__name__)

# (channel, first missing seq, last missing seq): the adapter fetches them and calls `repaired`.
OnGap = Callable[[str, int, int], None]


class Hub:
    def __init__(self, on_empty: Callable[[str], None] = lambda channel: None, on_gap: OnGap | None = None) -> None:
        self.on_empty = on_empty  # a channel lost its last local subscriber: the adapter unsubscribes
        self.on_gap = on_gap
        self.subscribers: dict[str, set[Connection]] = {}
        self.streams: dict[str, ChannelStream] = {}
        self.repairing: dict[str, list[Envelope]] = {}
        self.provisional: set[str] = set()  # followed on snapshots read before any relay started (`anchor`)
        self.gaps = 0
        self.resyncs = 0
        self.fanout_seconds = 0.0  # time spent handing shared frames to local subscribers
        self.fanout_messages = 0
        self.frames_direct = 0  # written by the shortcut (the connections count the rest)
        self.bytes_direct = 0

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
        self.repairing.pop(channel, None)
        self.provisional.discard(channel)
        self.on_empty(channel)
        return True

    def anchor(self, channel: str, epoch: int, seq: int, provisional: bool = False) -> None:
        """A channel's first local subscriber: its stream starts at the position its snapshot or replay reflects,
        so that a message lost right after it is noticed as a gap. (Called right after reading the position,
        with no await in between; a stream other subscribers follow already is left alone.)

        A provisional snapshot was read before any relay had started on the bus (a new bus, or one restarted
        empty): the first relay reads the outbox on from its own snapshot, so what was committed between the two
        never comes as a delta. Its subscribers read again once a relay has started: at the channel's first
        message, or at the next position check (`Repairs.check_once`) for a channel with none."""
        stream = self.streams.get(channel)
        if stream is not None and stream.seq < 0:
            stream.epoch, stream.seq = epoch, seq
        if provisional and stream is not None:
            self.provisional.add(channel)

    def delivered_seq(self, channel: str) -> int:
        """The newest seq delivered on a channel (-1: none yet, or not followed here)."""
        stream = self.streams.get(channel)
        return stream.seq if stream is not None else -1

    def on_message(self, channel: str, data: bytes) -> None:
        if channel not in self.subscribers:
            return
        try:
            env = envelope.unpack(data)
        except Exception:  # a foreign publisher on our prefix must not stop the node
            log.warning("dropped an undecodable bus message on %s", channel)
            return
        self._arrive(channel, env)

    def _arrive(self, channel: str, env: Envelope) -> None:
        if channel in self.provisional:  # a relay has started: what it counted before its first delta is not here
            self._resync(channel, "bus_reset")
            return
        waiting = self.repairing.get(channel)
        if waiting is not None:
            waiting.append(env)
            return
        stream = self.streams[channel]
        previous = (stream.epoch, stream.seq)
        arrival = stream.arrive(env.epoch, env.seq)
        if arrival is Arrival.DUPLICATE or arrival is Arrival.STALE_EPOCH:
            return
        if arrival is Arrival.GAP:
            self.gaps += 1
            if self.on_gap is None or env.seq <= previous[1]:
                self._resync(channel, "gap")
                return
            log.info("gap on %s: %d..%d missing, filling from history", channel, previous[1] + 1, env.seq - 1)
            stream.epoch, stream.seq = previous  # deliver the missing ones first, then this one
            self.repairing[channel] = [env]
            self.on_gap(channel, previous[1] + 1, env.seq - 1)
            return
        self.deliver(channel, env.seq, env.json, env.msgpack)

    def behind(self, channel: str, epoch: int, seq: int) -> bool:
        """Whether the bus's position (epoch, seq) is past what this node delivered on the channel (and no repair
        of it is under way)."""
        stream = self.streams.get(channel)
        if stream is None or channel in self.repairing or stream.seq < 0:
            return False
        return epoch >= stream.epoch and seq > stream.seq

    def check_position(self, channel: str, epoch: int, seq: int) -> None:
        """The bus says the channel is at (epoch, seq): fill in anything this node has not delivered."""
        if not self.behind(channel, epoch, seq):
            return
        stream = self.streams[channel]
        self.gaps += 1
        log.info("%s is behind the bus (%d < %d), filling from history", channel, stream.seq, seq)
        if self.on_gap is None:
            self._resync(channel, "gap")
            return
        self.repairing[channel] = []
        self.on_gap(channel, stream.seq + 1, seq)

    def repaired(self, channel: str, found: list[tuple[int, int, bytes]] | None) -> None:
        """The missing messages as (epoch, seq, msgpack), in order, or None when history lacks them."""
        waiting = self.repairing.pop(channel, None)
        if waiting is None or channel not in self.subscribers:
            return
        stream = self.streams[channel]
        if found is None:
            # The history could not say. What the bus delivered meanwhile may be the missing ones themselves (a
            # slow link's messages were late, not lost): go on if they follow on; resync only if they do not.
            if waiting and waiting[0].seq == stream.seq + 1 and waiting[0].epoch == stream.epoch:
                for env in waiting:
                    self._arrive(channel, env)
                return
            self._resync(channel, "gap")
            return
        for epoch, seq, msgpack in found:
            if seq > stream.seq:
                stream.epoch, stream.seq = max(epoch, stream.epoch), seq
                self.deliver(channel, seq, None, msgpack)
        for env in waiting:  # what arrived meanwhile, in order: normally the next ones now
            self._arrive(channel, env)

    def deliver(self, channel: str, seq: int, json: bytes | None, msgpack: bytes) -> None:
        """Hand one message, in order, to every local subscriber of the channel: one frame per wire format, the same
        bytes for all (the fan-out bench.deflate_cost times)."""
        subs = self.subscribers.get(channel)
        if not subs:
            return
        started = time.perf_counter()
        frames: list[Frame | None] = [None, None]  # the message in each format: JSON, MessagePack
        wires: list[bytes | None] = [None] * WIRE_KINDS  # its framing for each kind of socket (wire_kind)
        written = [0] * WIRE_KINDS
        for conn in tuple(subs):
            write = conn.fast
            if write is not None:  # the common case: straight to the socket
                kind = conn.wire_kind
                wire = wires[kind]
                if wire is None:
                    wire = wires[kind] = _frame(frames, kind & 1, json, msgpack).wire_for(kind >> 1)
                write(wire)
                written[kind] += 1
            else:
                conn.deliver(channel, seq, _frame(frames, int(conn.format == "msgpack"), json, msgpack))
        for kind, count in enumerate(written):
            if count:
                self.frames_direct += count
                self.bytes_direct += count * len(frames[kind & 1] or b"")  # the messages' bytes, as connections count
        self.fanout_messages += 1
        self.fanout_seconds += time.perf_counter() - started

    def resync_channel(self, channel: str, reason: str) -> None:
        self._resync(channel, reason)

    def _resync(self, channel: str, reason: str) -> None:
        self.repairing.pop(channel, None)
        told = self.subscribers.get(channel, ())
        if told:  # a line per channel, not per client: what a failed run's record needs to say what happened
            log.info("%s: %d subscriber(s) told to reload (%s)", channel, len(told), reason)
        for conn in tuple(told):
            self.resyncs += 1
            conn.resync(channel, reason)
            self.remove(conn, channel)


FORMATS: tuple[Format, Format] = ("json", "msgpack")  # by index, as a connection's wire_kind's low bit


def _frame(frames: list[Frame | None], msgpack_format: int, json: bytes | None, msgpack: bytes) -> Frame:
    """A message's shared frame in a format (0 JSON, transcoded once when the bus carried none; 1 MessagePack)."""
    frame = frames[msgpack_format]
    if frame is None:
        frame = frames[msgpack_format] = message_frame(msgpack, FORMATS[msgpack_format], json)
    return frame
