"""The benchmark's websocket client: one ``asyncio.Protocol`` per connection (RFC 6455, ws:// only), the upgrade by
hand and frames read by gateway.core.wsframe's reader (client mode: the server's frames are not masked).

No websockets library on the hot path: a subscriber costs a transport, this object and its reader. Data messages
(text and binary, fragments joined, permessage-deflate inflated) go to ``handler.ws_message`` with ``now`` =
``time.time()`` in ms when their last bytes arrived; pings are answered with a masked pong; a close frame is
answered with a masked close and the transport closed.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import random
import time
from collections.abc import Iterable, Mapping
from typing import Protocol

import msgspec

from gateway.core.wsframe import OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT, FrameReader, ProtocolError

from .counters import Stats

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 64 << 20  # a bigger message (or fragmented message) closes with 1009
MAX_HEAD = 64 << 10  # HTTP response head
DEFLATE_OFFER = "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits"
HANDSHAKE, OPEN, BODY, DONE = 0, 1, 2, 3  # a connection's phases


def mask_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """One client frame: masked with a random key, as RFC 6455 requires of clients."""
    n = len(payload)
    first = (0x80 if fin else 0) | opcode
    if n < 126:
        head = bytes((first, 0x80 | n))
    elif n < 1 << 16:
        head = bytes((first, 0x80 | 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((first, 0x80 | 127)) + n.to_bytes(8, "big")
    key = random.getrandbits(32).to_bytes(4, "big")
    if not n:
        return head + key
    masked = (
        int.from_bytes(payload, "big") ^ int.from_bytes(key * ((n + 3) >> 2), "big") >> (((-n) & 3) << 3)
    ).to_bytes(n, "big")
    return head + key + masked


def accept_key(key: bytes) -> bytes:
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


def request_head(host: str, port: int, target: str, headers: Iterable[str] = ()) -> bytes:
    """The upgrade request without its Sec-WebSocket-Key line and final blank line."""
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {host}:{port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Version: 13",
        *headers,
    ]
    return ("\r\n".join(lines) + "\r\n").encode("latin-1")


def retry_delay(status: int, headers: Mapping[str, str], body: bytes) -> float | None:
    """The delay a refusal asks for: the gateway's `retry_after_ms` (already jittered), else Retry-After
    (seconds, jittered here), else None (the caller backs off by itself)."""
    if status != 503 and "retry-after" not in headers:
        return None
    try:
        ms = msgspec.json.decode(body).get("retry_after_ms")
        if isinstance(ms, (int, float)) and ms >= 0:
            return ms / 1000.0
    except (msgspec.DecodeError, AttributeError):
        pass
    try:
        return float(headers["retry-after"]) * random.uniform(0.5, 1.5)
    except (KeyError, ValueError):
        return None


class Handler(Protocol):
    """What a WSClient reports to (a Subscriber; tests use their own)."""

    stats: Stats

    def ws_open(self, ws: WSClient) -> None: ...
    def ws_message(self, opcode: int, payload: bytes, now: float) -> None: ...
    def ws_closed(self, ws: WSClient, code: int) -> None: ...
    def ws_refused(self, ws: WSClient, status: int, headers: dict[str, str], body: bytes) -> None: ...
    def ws_failed(self, ws: WSClient, reason: str) -> None: ...


class WSClient(asyncio.Protocol):
    """One websocket connection: the upgrade, then its frames through a FrameReader."""

    __slots__ = (
        "handler", "stats", "transport", "buf", "key", "phase", "status", "resp_headers", "body_need", "reader",
        "close_code", "close_reason", "_head",
    )  # fmt: skip

    def __init__(self, handler: Handler, head: bytes) -> None:
        self.handler = handler
        self.stats = handler.stats
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()  # the HTTP answer until the upgrade (a refusal's body too)
        self.key = base64.b64encode(random.getrandbits(128).to_bytes(16, "big"))
        self.phase = HANDSHAKE
        self.status = 0
        self.resp_headers: dict[str, str] = {}
        self.body_need = -1
        self.reader: FrameReader | None = None  # once upgraded
        self.close_code: int | None = None
        self.close_reason = ""  # the server's close frame's reason (a restarting node's retry hint)
        self._head = head

    @property
    def is_open(self) -> bool:
        return self.phase == OPEN

    @property
    def unread(self) -> int:
        """Bytes received and not read yet: a frame's start, waiting for the rest of it."""
        return len(self.buf) + (self.reader.buffered if self.reader is not None else 0)

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.write(self._head + b"Sec-WebSocket-Key: " + self.key + b"\r\n\r\n")  # type: ignore[attr-defined]

    def connection_lost(self, exc: Exception | None) -> None:
        phase, self.phase = self.phase, DONE
        if phase == OPEN:
            self.handler.ws_closed(self, self.close_code if self.close_code is not None else 1006)
        elif phase == BODY:
            self.handler.ws_refused(self, self.status, self.resp_headers, bytes(self.buf))
        elif phase == HANDSHAKE:
            self.handler.ws_failed(self, type(exc).__name__ if exc is not None else "eof")

    def data_received(self, data: bytes) -> None:
        self.stats.bytes += len(data)
        if self.phase == OPEN:
            self._frames(data, time.time() * 1000.0)
            return
        self.buf += data
        if self._handshake():
            rest, self.buf = bytes(self.buf), bytearray()  # frames in the same packet as the 101
            if rest:
                self._frames(rest, time.time() * 1000.0)

    def eof_received(self) -> bool | None:
        return None  # close the transport

    # -- sending

    def send(self, data: bytes, binary: bool = False) -> None:
        if self.phase == OPEN and self.transport is not None:
            self.transport.write(mask_frame(OP_BINARY if binary else OP_TEXT, data))

    def close(self, code: int = 1000) -> None:
        """A clean close: send the close frame and close (without waiting for the server's)."""
        if self.transport is None:
            return
        if self.phase == OPEN:
            self.transport.write(mask_frame(OP_CLOSE, code.to_bytes(2, "big")))
        self.phase = DONE
        self.transport.close()

    def abort(self) -> None:
        """Drop the connection abruptly (no close frame); no callback follows."""
        self.phase = DONE
        if self.transport is not None:
            self.transport.abort()

    # -- receiving

    def _handshake(self) -> bool:
        """Read the HTTP answer; True once upgraded (what follows in `buf` is frames)."""
        buf = self.buf
        if self.phase == HANDSHAKE:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    self._give_up("head_too_large")
                return False
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            del buf[: end + 4]
            try:
                status = int(lines[0].split(" ", 2)[1])
            except (IndexError, ValueError):
                self._give_up("bad_status_line")
                return False
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            if status == 101:
                if headers.get("sec-websocket-accept", "").encode() != accept_key(self.key):
                    self._give_up("bad_accept")
                    return False
                extensions = headers.get("sec-websocket-extensions", "")
                deflate = extensions.startswith("permessage-deflate")
                # Without server_no_context_takeover (Node ws's default) the server's context carries over.
                takeover = deflate and "server_no_context_takeover" not in extensions
                self.reader = FrameReader(MAX_MESSAGE, deflate, client=True, context_takeover=takeover)
                self.phase = OPEN
                self.handler.ws_open(self)
                return self.phase == OPEN
            self.status, self.resp_headers, self.phase = status, headers, BODY
            try:
                self.body_need = int(headers.get("content-length", "-1"))
            except ValueError:
                self.body_need = -1
        if self.phase == BODY and 0 <= self.body_need <= len(buf):
            self.phase = DONE
            self.handler.ws_refused(self, self.status, self.resp_headers, bytes(buf[: self.body_need]))
            if self.transport is not None:
                self.transport.close()
        return False

    def _give_up(self, reason: str) -> None:
        self.phase = DONE
        if self.transport is not None:
            self.transport.abort()
        self.handler.ws_failed(self, reason)

    def _fail(self, code: int) -> None:
        """A protocol error or an oversized message: close with `code` and report it."""
        self.stats.protocol_errors += 1
        self.close_code = code
        if self.transport is not None:
            self.transport.write(mask_frame(OP_CLOSE, code.to_bytes(2, "big")))
            self.transport.close()
        self.phase = DONE
        self.handler.ws_closed(self, code)

    def _frames(self, data: bytes, now: float) -> None:
        reader = self.reader
        assert reader is not None
        st = self.stats
        read = reader.frames
        try:
            messages = reader.feed(data)
        except ProtocolError as exc:
            st.frames += reader.frames - read
            if self._deliver(exc.messages, now):  # what came before the broken frame is still the server's
                self._fail(exc.code)
            return
        st.frames += reader.frames - read
        self._deliver(messages, now)

    def _deliver(self, messages: list[tuple[int, bytes]], now: float) -> bool:
        """Hand the messages over, answering pings and a close; False once the connection is done."""
        st = self.stats
        on_message = self.handler.ws_message
        for op, payload in messages:
            if op == OP_TEXT or op == OP_BINARY:
                st.messages += 1
                on_message(op, payload, now)
                if self.phase != OPEN:
                    return False
            elif not self._control(op, payload):
                return False
        return True

    def _control(self, op: int, payload: bytes) -> bool:
        """Answer a ping; answer a close and report it (False: the connection is done)."""
        if op == OP_PING:
            self.stats.server_pings += 1
            self.transport.write(mask_frame(OP_PONG, payload))  # type: ignore[union-attr]
        elif op == OP_CLOSE:
            code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
            self.close_code = code
            self.close_reason = payload[2:].decode(errors="replace")
            self.transport.write(mask_frame(OP_CLOSE, payload[:2]))  # type: ignore[union-attr]
            self.transport.close()  # type: ignore[union-attr]
            self.phase = DONE
            self.handler.ws_closed(self, code)
            return False
        return True
