"""The node's websocket link: a small asyncio protocol the hub writes to, once the handshake is answered.

The node's socket layer answers the opening handshake itself (gateway.web.server.upgrade, outside ASGI) and
gives the transport a `DirectLink` as its protocol. What stays per connection is the link (a few slots), the
uvloop transport and the hub's `Connection`.

Compression (permessage-deflate) is negotiated in the handshake by gateway.web.websocket.deflate, which makes every
compressed message independent of the connection: the link then writes each shared frame's compressed
framing, built once per frame (gateway.core.wsframe), and inflates what the client compresses, each message
on its own. Nothing about compression is kept per connection but the window size.

The hub writes each shared, pre-framed message with one `transport.write`; a peer that stops reading makes
the transport call `pause_writing`, and frames then wait in the connection's bounded outbound until
`resume_writing`. Client messages are parsed as they arrive and handed to a callback: no coroutine waits
on a connection's reads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from ...core.ratelimit import FrameBudget
from ...core.wsframe import (
    CLOSE_FLOOD,
    OP_BINARY,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    Frame,
    FrameReader,
    ProtocolError,
    build,
    close_frame,
    parse_close,
)
from .tcpstate import acknowledged, unsent

log = logging.getLogger(__name__)

CLOSE_TIMEOUT = 2.0  # a peer that does not answer our close frame (or never drains) is cut off after this

OnMessage = Callable[[str | bytes], None]
OnPing = Callable[[bytes], None]
OnLost = Callable[[], None]


class DirectLink(asyncio.Protocol):
    """A handed-over websocket connection: writes shared frames, reads client messages, closes cleanly."""

    __slots__ = (
        "transport",
        "writable",
        "write_wire",
        "deflate",
        "reader",
        "on_message",
        "on_ping",
        "on_lost",
        "conn",
        "connections",
        "closing",
        "close_code",
        "failed",
        "ping_token",
        "delivered",
        "drains",
        "_drains_at_ping",
        "_buffered_at_ping",
        "_acked_at_ping",
        "budget",
        "message_timeout",
        "_unfinished",
        "_progress_at",
        "_socket",
        "_abort",
    )

    def __init__(self, transport: asyncio.Transport, max_size: int, connections: set[Any], deflate: int = 0) -> None:
        self.transport = transport
        self.writable = not transport.is_closing()
        self.write_wire: Callable[[bytes], object] | None = transport.write
        self.deflate = deflate  # permessage-deflate's window bits for what the node sends; 0: not negotiated
        self.reader = FrameReader(max_size, inflate=bool(deflate))
        self.on_message: OnMessage = _ignore
        self.on_ping: OnPing = self._pong  # the app's session answers pings within its bounds
        self.on_lost: OnLost = _nothing
        self.conn: Writer = _NoWriter()  # the hub's connection: told when the socket pauses and resumes
        self.connections = connections  # the server's open links: a shutdown closes each with a retry hint
        self.closing = False  # our close frame is sent (or the peer's came): no more messages either way
        self.close_code: int | None = None  # the code of the close frame we sent (the log's close line reads it)
        self.failed = False  # the client broke the protocol: nothing it sends is read any more (RFC 6455 7.1.7)
        self.ping_token: bytes | None = None  # the keepalive ping the peer has not answered yet
        # Once the connection is gone: every byte the peer's TCP acknowledged (None where the kernel does not
        # say). The close's log line reads it: the hub writes live frames straight to the socket, uncounted.
        self.delivered: int | None = None
        self.drains = 0  # times the socket took more after backing up: the peer reads, however slowly
        self._drains_at_ping = 0
        self._buffered_at_ping = 0
        self._acked_at_ping = -1  # what the peer had acknowledged at the last ping, if its window was full then
        # What the client may send (every frame and byte counts; past it: 4029), and how long a frame or a
        # fragmented message may stay unfinished (1008); None: no bound (the node's sessions set both).
        self.budget: FrameBudget | None = None
        self.message_timeout: float | None = None
        self._unfinished: asyncio.TimerHandle | None = None
        self._progress_at = -1  # the reader's progress when the unfinished message's timer was set
        self._socket = transport.get_extra_info("socket")
        self._abort: asyncio.TimerHandle | None = None

    # -- the hub's side (gateway.hub.connection.Link)

    def write(self, frame: Frame) -> None:
        self.transport.write(frame.deflated(self.deflate) if self.deflate else frame.wire)

    def wake(self) -> None:
        pass  # the transport calls resume_writing when it can take more

    def close(self, code: int, reason: str = "") -> None:
        """Send a close frame and wait for the peer's (closing the socket with unread input would reset it,
        and the peer could lose our close frame); a peer that never answers is cut off."""
        if self._send_close(code, reason):
            self._abort = asyncio.get_running_loop().call_later(CLOSE_TIMEOUT, self.transport.abort)

    def ping(self, wire: bytes, token: bytes) -> None:
        """Keepalive: a peer that has not answered the last ping by the next one is gone, unless it has read
        since (a slow reader: our ping waits behind what it has not read yet). Only a pong carrying the
        ping's token answers it, so a peer that reads nothing cannot pass by sending pongs of its own."""
        if self.closing:
            return
        buffered = self.transport.get_write_buffer_size()
        if self.ping_token is not None and not self._read_since_ping(buffered):
            self.close(1011, "keepalive ping timeout")
            return
        self.ping_token = token
        self._drains_at_ping, self._buffered_at_ping = self.drains, buffered
        # Only while bytes wait for the peer's window does an acknowledgement mean its application read; with
        # the window open its kernel takes our bytes whether anyone reads them or not.
        self._acked_at_ping = acknowledged(self._socket) if unsent(self._socket) else -1
        self.transport.write(wire)

    def _read_since_ping(self, buffered: int) -> bool:
        # While the socket is backed up nothing but pings is added to the transport's buffer (frames wait in
        # the hub's outbound), so a smaller buffer, or a resume, means the peer read; so does an acknowledgement
        # from a full window (gateway.web.websocket.tcpstate), which comes long before the transport's buffer moves.
        if self.drains != self._drains_at_ping or buffered < self._buffered_at_ping:
            return True
        return self._acked_at_ping >= 0 and acknowledged(self._socket) > self._acked_at_ping

    # -- the transport's side

    def data_received(self, data: bytes) -> None:
        if self.failed:
            return
        reader, budget = self.reader, self.budget
        if budget is not None:
            if not budget.take_bytes(len(data), time.monotonic()):
                self._fail(CLOSE_FLOOD, "too many bytes: slow down")
                return
            reader.allowance = reader.frames + int(budget.frames)  # one read parses at most what is left
        read_before = reader.frames
        error: ProtocolError | None = None
        try:
            messages = reader.feed(data)
        except ProtocolError as exc:
            messages, error = exc.messages, exc  # what came before the broken frame is handled first
        if budget is not None:
            budget.take_frames(reader.frames - read_before)
        if self._dispatch(messages):
            if error is not None:
                self._fail(error.code, str(error))
            elif self.message_timeout is not None:
                self._watch_unfinished(reader)

    def _watch_unfinished(self, reader: FrameReader) -> None:
        """A frame or fragmented message left unfinished must end within `message_timeout`, counted from the
        last frame that ended something: a client cannot hold a message (and its bytes here) open for ever."""
        if not reader.unfinished:
            if self._unfinished is not None:
                self._unfinished.cancel()
                self._unfinished = None
            return
        if self._unfinished is not None and reader.progress == self._progress_at:
            return  # still the same unfinished message: its deadline stands
        if self._unfinished is not None:
            self._unfinished.cancel()
        self._progress_at = reader.progress
        timeout = self.message_timeout or 0.0
        self._unfinished = asyncio.get_running_loop().call_later(timeout, self._left_unfinished, timeout)

    def _left_unfinished(self, timeout: float) -> None:
        self._unfinished = None
        self._fail(1008, f"message left unfinished for {timeout:g} s")

    def _dispatch(self, messages: list[tuple[int, bytes]]) -> bool:
        """Handle the client's messages in order; False once the connection is over (the peer's close came,
        or a message broke the protocol)."""
        for opcode, payload in messages:
            if opcode == OP_CLOSE:
                self._closed_by_peer(payload)
                return False
            if self.closing:
                continue  # only the peer's close frame matters now
            if opcode == OP_TEXT:
                try:
                    text = payload.decode()
                except UnicodeDecodeError:
                    self._fail(1007, "text message is not UTF-8")
                    return False
                self.on_message(text)
            elif opcode == OP_BINARY:
                self.on_message(payload)
            elif opcode == OP_PING:
                self.on_ping(payload)
            elif opcode == OP_PONG and payload == self.ping_token:
                self.ping_token = None  # only an answer to our own ping proves the peer alive
        return True

    def _closed_by_peer(self, payload: bytes) -> None:
        """The peer's close frame: a valid one is echoed (the handshake is then done), an invalid one answered
        with 1002 or 1007; either way the TCP connection closes now."""
        try:
            code, _ = parse_close(payload)
        except ProtocolError as exc:
            code = exc.code
        self._send_close(code or 1000)
        self.transport.close()

    def _fail(self, code: int, reason: str) -> None:
        """The client broke the protocol: our close frame, then our end of the TCP connection (the peer's
        close, if any, is not waited for); a peer that does not close its end is cut off."""
        self.failed = True
        self._send_close(code, reason)
        if self.transport.is_closing():
            return
        self.transport.pause_reading()  # nothing it sends is read now: the kernel, not the loop, holds the rest
        if self.transport.can_write_eof():
            self.transport.write_eof()  # after the close frame: the peer reads it, then sees the end
            if self._abort is None:
                self._abort = asyncio.get_running_loop().call_later(CLOSE_TIMEOUT, self.transport.abort)
        else:
            self.transport.close()

    def _send_close(self, code: int, reason: str = "") -> bool:
        """Our close frame, once; False when one was sent already or the socket is gone."""
        if self.closing:
            return False
        self.closing = True
        self.writable = False
        self.conn.paused()
        if self.transport.is_closing():
            return False
        self.close_code = code
        self.transport.write(close_frame(code, reason))
        return True

    def _pong(self, payload: bytes) -> None:
        self.transport.write(build(OP_PONG, payload))

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def pause_writing(self) -> None:
        self.writable = False
        self.conn.paused()

    def resume_writing(self) -> None:
        self.drains += 1
        if not self.closing:
            self.writable = True
            self.conn.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.delivered = acknowledged(self._socket) or None  # the socket is closed once this returns
        self.writable = False
        self.closing = True
        self.conn.paused()
        self.connections.discard(self)
        for timer in (self._abort, self._unfinished):
            if timer is not None:
                timer.cancel()
        self._abort = self._unfinished = None
        self.on_lost()


class Writer(Protocol):
    """The hub's side of a link (gateway.hub.connection.Connection)."""

    def flush(self) -> None: ...

    def paused(self) -> None: ...


class _NoWriter:
    def flush(self) -> None:
        pass

    def paused(self) -> None:
        pass


def _ignore(data: str | bytes) -> None:
    pass


def _nothing() -> None:
    pass
