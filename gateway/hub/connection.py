"""One websocket connection as the hub sees it: its subscriptions, its bounded pending output, and its link.

Frames are references to bytes shared by every subscriber of a channel. A connection writes a frame to its
link at once while the peer keeps up; otherwise the frame waits in the bounded `Outbound` until the link
says it can take more. The link is either the node's own websocket protocol (a synchronous
`transport.write` of a pre-built frame, no task per connection) or the standard ASGI interface, where a
writer task awaits `send` (see gateway/web/).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Protocol

from ..core.outbound import Outbound, Verdict
from ..core.protocol import Format, Resync, ServerMessage, encode
from ..core.subscription import Subscription
from ..core.wsframe import CLOSE_FLOOD, OP_PONG, PRIVATE_LEVEL, Frame, build
from .held import HeldChannels

log = logging.getLogger(__name__)

CLOSE_EXPIRED = 4001  # the session's token expired: renew it and connect again
CLOSE_SLOW = 4008  # could not drain its output even after a resync
MAX_REFUSED = 64  # replies in a row that found no room before the client is closed as a slow consumer
CLOSE_BUS_LOST = 1013  # try again later: this node lost its bus (Redis), so it can deliver nothing live
CLOSE_REASONS = {
    CLOSE_BUS_LOST: "the node lost its bus: connect again",
    CLOSE_EXPIRED: "token expired",
    CLOSE_SLOW: "slow consumer: could not drain",
    CLOSE_FLOOD: "too many messages",
}


class Link(Protocol):
    """Where a connection's frames go."""

    writable: bool  # write now; False: frames wait in the connection's outbound until `Connection.flush`
    write_wire: Callable[[bytes], object] | None  # writes framed bytes to the socket (links the node writes itself)
    deflate: int  # the framing `write_wire` takes: 0 plain, else deflated with this window (Frame.wire_for)

    def write(self, frame: Frame) -> None: ...

    def wake(self) -> None:
        """Frames were queued (a writer task that waits for them wakes up)."""

    def close(self, code: int, reason: str) -> None: ...

    def ping(self, wire: bytes, token: bytes) -> None:
        """Keepalive, for links the node keeps alive itself: the framed ping, and the token a pong must carry."""


class Connection:
    __slots__ = (
        "log_id",
        "user_id",
        "cluster_id",
        "format",
        "channels",
        "teams_present",
        "held",
        "outbound",
        "close_code",
        "on_lag",
        "lags",
        "link",
        "fast",
        "wire_kind",
        "frames_sent",
        "bytes_sent",
        "refused",
        "_drained",
        "token_id",
        "expires",
        "keepalive_slice",
    )

    def __init__(
        self, user_id: int, fmt: Format, max_pending: int, link: Link | None = None, expires: float = math.inf
    ) -> None:
        self.user_id = user_id
        # A cluster's feed (opened with its key, user_id 0): it may follow its own commands' channel, nothing else.
        self.cluster_id: int | None = None
        self.format = fmt
        # Each subscribed channel and its team. Few and small per connection, but 16,000 connections hold them:
        # one dict, and a tuple (the empty one is shared) rather than two more sets of about 200 bytes each.
        self.channels: dict[str, int] = {}
        self.teams_present: tuple[int, ...] = ()  # teams whose channel this connection follows (presence)
        self.held = HeldChannels()  # the subscriptions of its channels that are not live (gateway.hub.held)
        self.outbound = Outbound(max_pending)
        self.close_code: int | None = None
        # A channel's live frame did not fit within the bound (see `deliver`): the node runs its catch-up.
        self.on_lag: Callable[[Connection, Subscription[Frame]], None] | None = None
        self.lags = 0
        self.link: Link = link if link is not None else _Unlinked()
        # The hub's shortcut: the socket's write, while frames can go straight to it (the peer keeps up, nothing
        # waits in the outbound, no channel buffers for a snapshot, open); None sends the hub through `deliver`.
        self.fast: Callable[[bytes], object] | None = None
        self.wire_kind = wire_kind(fmt, 0)  # which framing `fast` takes (see `wire_kind`), set with it
        self.frames_sent = 0
        self.bytes_sent = 0
        self.refused = 0  # replies in a row that did not fit within the bound
        self._drained: asyncio.Event | None = None  # made only while someone waits for the output to drain
        self.token_id = ""  # the session's (set at the handshake): revoking it closes this connection
        self.log_id = ""  # in every log line about it (connection_id: gateway.web.node.logs)
        self.expires = expires  # when the session's token expires (wall clock): the node closes it then
        self.keepalive_slice = -1  # which of the node's keepalive slices pings it (gateway.core.keepalive)

    def close(self, code: int) -> None:
        """End the connection with a documented code."""
        if self.close_code is None:
            self.close_code = code
            self.fast = None
            self.link.close(code, CLOSE_REASONS.get(code, ""))
            if self._drained is not None:
                self._drained.set()

    def unlink(self) -> None:
        """The socket is gone: forget its link. The link holds this connection and its session's callbacks, so
        keeping it would make a cycle that only a full pass of the collector frees, which a node delays
        (gateway.web.node.garbage): every connection that left would stay in memory until then."""
        self.fast = None
        self.link = _Unlinked()

    def refresh(self) -> None:
        """Take the hub's shortcut again if nothing stands in the way (see `fast`)."""
        link = self.link
        ok = link.writable and self.outbound.frames is None and not self.held and self.close_code is None
        self.fast = link.write_wire if ok else None
        self.wire_kind = wire_kind(self.format, link.deflate)

    def subscribed_channels(self) -> set[str]:
        """Every channel the connection follows, live or held (all the hub may hold it under)."""
        return self.channels.keys() | self.held.keys()

    def paused(self) -> None:
        """The socket takes no more for now: frames wait in the outbound until `flush`."""
        self.fast = None

    def open(self, channel: str, team_id: int) -> Subscription[Frame]:
        """Subscribe to a channel: its live frames are held from now on, until its subscription goes live."""
        self.channels[channel] = team_id
        sub = self.held.open(channel)  # subscribed again: the new subscription replaces the earlier one
        self.fast = None
        return sub

    def leave(self, channel: str) -> None:
        """Unsubscribe: nothing more of the channel goes out (what is pending stays)."""
        self.channels.pop(channel, None)
        if self.held.end(channel):
            self.refresh()

    def go_live(self, sub: Subscription[Frame]) -> None:
        """The subscription's `GoLive`: the channel's frames go straight out again (the machine is dropped)."""
        if self.held.release(sub):
            self.refresh()

    def deliver(self, channel: str, seq: int, frame: Frame) -> None:
        """A shared frame of a channel (called by the hub, never awaits)."""
        held = self.held
        if held:
            if held.hold(channel, seq, frame, self.outbound.limit):
                return  # held behind the channel's snapshot, replay or catch-up, or the client has it already
            if not held:
                self.refresh()  # the last machine settled: the hub's shortcut again
        if self.push(frame) is Verdict.LAG:
            self.lag(channel, seq)

    def lag(self, channel: str, seq: int) -> None:
        """The client fell behind on `channel` and frame `seq` did not fit: hold the channel's frames (within
        the bound) and have the node send what it missed from the channel's history once it has drained.
        What is pending stays: the client loses nothing and reloads nothing while the history reaches back."""
        sub = self.held.lagging(channel, seq)
        self.fast = None
        self.lags += 1
        if self.on_lag is not None:
            self.on_lag(self, sub)

    def push(self, frame: Frame, force: bool = False) -> Verdict:
        if self.close_code is not None:
            return Verdict.QUEUED
        link = self.link
        if link.writable and self.outbound.frames is None:  # the peer keeps up: straight to the socket
            link.write(frame)
            self.frames_sent += 1
            self.bytes_sent += len(frame)
            return Verdict.QUEUED
        self.fast = None
        verdict = self.outbound.push(frame, force)
        if verdict is Verdict.CLOSE:
            log.info("slow consumer user=%s: still cannot drain after a resync, closing", self.user_id)
            self.close(CLOSE_SLOW)
            return verdict
        if link.writable:
            self.flush()
        else:
            link.wake()
        return verdict

    def send_message(self, message: ServerMessage) -> None:
        """A message of the node's own for this connection alone (snapshot pages, resyncs): encoded for its
        format, and not counted against the bound (their senders wait for the connection to drain). Deflated, if
        the connection compresses, at the fast level: this connection alone pays for it."""
        self.push(self.framed(message), force=True)

    def framed(self, message: ServerMessage) -> Frame:
        """A message of the node's own, encoded for this connection's format (deflated at the fast level)."""
        return Frame(encode(message, self.format), self.format == "json", PRIVATE_LEVEL)

    def reply(self, message: ServerMessage) -> None:
        """The answer to one of the client's own messages (a pong, an error). It counts against the bound like a
        live frame: a client that asks and never reads cannot make the node hold more than the bound. A reply that
        does not fit is dropped, and a client whose replies keep finding no room is closed as a slow consumer."""
        self._reply(Frame(encode(message, self.format), self.format == "json", PRIVATE_LEVEL))

    def tell(self, message: ServerMessage) -> None:
        """What the client's state depends on (a subscribe that could not be served ended: it must ask again):
        never dropped like a reply. Past twice the bound the connection is closed instead, as a slow consumer;
        the client then connects again and resumes every channel from its cursor, so nothing is left stale."""
        if self.outbound.size + 1024 > 2 * self.outbound.limit:
            log.info("slow consumer user=%s: no room to say a subscribe ended, closing", self.user_id)
            self.close(CLOSE_SLOW)
            return
        self.send_message(message)

    def reply_pong(self, payload: bytes) -> None:
        """The websocket pong to a client's ping: a reply like any other, within the same bound."""
        self._reply(Frame.control(build(OP_PONG, payload)))

    def _reply(self, frame: Frame) -> None:
        self.refused = refused_in_a_row(self.refused, self.push(frame))
        if self.refused >= MAX_REFUSED:
            log.info("slow consumer user=%s: its replies found no room %d times, closing", self.user_id, self.refused)
            self.close(CLOSE_SLOW)

    def resync(self, channel: str, reason: str) -> None:
        """Tell the client to reload a channel; it is unsubscribed here until it subscribes again."""
        if reason == "slow_consumer":
            self.outbound.resyncing = True  # past the bound again before draining once: closed
        self.held.resync(channel, reason)
        self.leave(channel)
        self.send_message(Resync(channel=channel, reason=reason))

    def take(self) -> Frame | None:
        """The next pending frame, counted as sent (the link writes it)."""
        frame = self.outbound.pop()
        if frame is not None:
            self.frames_sent += 1
            self.bytes_sent += len(frame)
        if self._drained is not None and self.outbound.size < self.outbound.limit // 4:
            self._drained.set()
        return frame  # type: ignore[return-value]

    def flush(self) -> None:
        """The link can take more: write pending frames until it cannot, or none is left."""
        link = self.link
        while link.writable and self.close_code is None:
            frame = self.take()
            if frame is None:
                self.refresh()
                return
            link.write(frame)

    async def drain(self) -> None:
        """Wait until pending output is under a quarter of the bound: room for a page, or to go live with (paged
        snapshots wait here between pages)."""
        while self.outbound.size > self.outbound.limit // 4 and self.close_code is None:
            if self._drained is None:
                self._drained = asyncio.Event()
            self._drained.clear()
            await self._drained.wait()
        self._drained = None

    async def send_paced(self, frame: Frame) -> None:
        """A channel's frame for this connection alone (a replay, a backlog, held frames released), paced by
        bytes: batches can be big, so past half the bound it waits for a quarter."""
        self.push(frame, force=True)
        if self.outbound.size > self.outbound.limit // 2:
            await self.drain()


def refused_in_a_row(refused: int, verdict: Verdict) -> int:
    """Replies in a row that found no room within the bound, after one more reply's verdict."""
    if verdict is Verdict.QUEUED:
        return 0
    return refused + 1 if verdict is Verdict.LAG else refused  # CLOSE: closed already, nothing more counts


WIRE_KINDS = 32  # wire_kind() < this


def wire_kind(fmt: Format, deflate: int) -> int:
    """A small int naming the bytes a connection's socket takes for a shared message: its format (bit 0) and
    its compression window (0 plain, else 9 to 15), so that the hub builds each kind once per message."""
    return deflate << 1 | (fmt == "msgpack")


class _Unlinked:
    """Not attached to a socket yet (and in unit tests): frames wait in the outbound."""

    writable = False
    write_wire: Callable[[bytes], object] | None = None
    deflate = 0

    def write(self, frame: Frame) -> None:
        raise AssertionError("an unlinked connection writes nothing")

    def wake(self) -> None:
        pass

    def close(self, code: int, reason: str) -> None:
        pass

    def ping(self, wire: bytes, token: bytes) -> None:
        pass
