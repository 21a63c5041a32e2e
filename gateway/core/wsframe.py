"""Websocket framing without I/O (RFC 6455): shared outgoing frames and a reader of a client's frames.

A channel message is framed once and the same bytes are written to every subscriber: a server's frames are
not masked, so nothing in them depends on the connection. Client frames are masked and rare (subscribes,
pings); the reader unmasks them with websockets' C helper. The same reader, with `client=True`, reads a
server's unmasked frames for the benchmark's subscribers (bench/subscribers/wsclient.py).

Compression (permessage-deflate, RFC 7692) keeps that: the node compresses with no context taken over from
one message to the next (`server_no_context_takeover`), so a message's compressed bytes depend on nothing
but the message and the window size. A frame is deflated once, on first use, and the same compressed frame
(RSV1 set) goes to every subscriber that negotiated compression, beside the plain frame for the others: the
shape of gorilla/websocket's PreparedMessage. Clients are told not to take context over either
(`client_no_context_takeover`), so each compressed client message is inflated on its own, with nothing kept
per connection.
"""

from __future__ import annotations

import struct
import zlib

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - the pure-Python fallback of the same function
    from websockets.utils import apply_mask

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
CLOSE_FLOOD = 4029  # the client sent past its budget of frames, bytes or messages
_DATA_OPS = (OP_TEXT, OP_BINARY)
_CONTROL_OPS = (OP_CLOSE, OP_PING, OP_PONG)
RSV1 = 0x40  # the first frame of a compressed message

# Compression (docs/performance.md, "Compression", measures these on the demo's messages).
WINDOW_BITS = 15  # the node's LZ77 window, unless a client asks for a smaller one (server_max_window_bits)
DEFLATE_MIN = 256  # smaller messages go uncompressed: they would shrink by under a quarter (tens of bytes) for 4-7 µs
SHARED_LEVEL = 6  # a shared frame is deflated once, whatever the number of subscribers: compress well
PRIVATE_LEVEL = 1  # a frame for one connection (its snapshot pages) costs its deflate on that one: compress fast
# zlib's hash table: at 4 it compresses these messages as well as at 8 and a deflate allocates 136 KB instead of
# 256 KB, which made the demo's mix of messages three times faster to deflate (the allocator gives less back).
MEM_LEVEL = 4
_TAIL = b"\x00\x00\xff\xff"  # what a sync flush ends with: removed by the sender, put back by the receiver


def header(opcode: int, length: int, rsv: int = 0) -> bytes:
    """The header of one unmasked, final frame (`rsv`: RSV1 for a compressed message)."""
    first = 0x80 | rsv | opcode
    if length < 126:
        return bytes((first, length))
    if length < 1 << 16:
        return struct.pack("!BBH", first, 126, length)
    return struct.pack("!BBQ", first, 127, length)


def build(opcode: int, payload: bytes) -> bytes:
    return header(opcode, len(payload)) + payload


def deflate(data: bytes, wbits: int = WINDOW_BITS, level: int = SHARED_LEVEL) -> bytes:
    """One message's payload compressed on its own (RFC 7692 7.2.1: no context from any other message)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, -wbits, MEM_LEVEL)
    out = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
    return out[:-4]  # the sync flush's empty stored block, which the receiver appends again


def inflate(payload: bytes, max_size: int, context: zlib._Decompress | None = None) -> bytes:
    """A client's compressed message, decompressed on its own (client_no_context_takeover) to at most
    `max_size` bytes: a larger one (a decompression bomb) is ProtocolError 1009, data that is not DEFLATE 1002.
    With `context`, the peer's context taken over from its earlier messages (a server that keeps it)."""
    decompressor = context or zlib.decompressobj(-15)  # a 32 KiB window inflates whatever window the peer used
    try:
        data = decompressor.decompress(payload + _TAIL, max_size + 1)
    except zlib.error:
        raise ProtocolError(1002, "a compressed message that does not inflate") from None
    if len(data) > max_size:
        raise ProtocolError(1009, f"message larger than {max_size} bytes once decompressed")
    return data


def close_frame(code: int, reason: str = "") -> bytes:
    assert sendable_close_code(code), f"{code} is not a close code to send"
    return build(OP_CLOSE, struct.pack("!H", code) + reason.encode()[:120].decode(errors="ignore").encode())


def sendable_close_code(code: int) -> bool:
    """A code an endpoint may put in a close frame (RFC 6455 7.4): defined ones, registered and private ones."""
    return 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999


def parse_close(payload: bytes) -> tuple[int | None, str]:
    """The code and reason of a peer's close frame (None: it gave no code); ProtocolError when invalid: 1002 for
    a 1-byte payload or a code nobody may send, 1007 for a reason that is not UTF-8."""
    if not payload:
        return None, ""
    if len(payload) == 1:
        raise ProtocolError(1002, "a close frame's payload is empty or at least two bytes")
    code = int.from_bytes(payload[:2], "big")
    if not sendable_close_code(code):
        raise ProtocolError(1002, f"close code {code} may not be sent")
    try:
        return code, payload[2:].decode()
    except UnicodeDecodeError:
        raise ProtocolError(1007, "a close reason must be UTF-8") from None


def ping_frame(token: bytes) -> bytes:
    """A keepalive ping: one frame per round shared by every connection; its token is new each round, so only
    a peer that read the ping can answer it (a blind pong does not keep a dead peer alive)."""
    return build(OP_PING, token)


class Frame:
    """One message for subscribers, encoded once: its payload, and on first use its websocket framing (for
    connections the node writes itself), its compressed framing (for those of them that negotiated
    permessage-deflate, one per window size) or its text (for connections behind the standard ASGI interface).

    `level` is the zlib level it is deflated at: SHARED_LEVEL for a frame many subscribers share (its cost is
    paid once), PRIVATE_LEVEL for one connection's own (its snapshot pages), 0 never (control frames)."""

    __slots__ = ("data", "text", "level", "_wire", "_str", "_deflated")

    def __init__(self, data: bytes, text: bool, level: int = SHARED_LEVEL) -> None:
        self.data = data
        self.text = text
        self.level = level
        self._wire: bytes | None = None
        self._str: str | None = None
        self._deflated: dict[int, bytes] | None = None  # window bits -> compressed frame

    def __len__(self) -> int:
        return len(self.data)

    @classmethod
    def control(cls, wire: bytes) -> Frame:
        """A control frame (a pong) already framed, for the node's own websocket link only: never compressed."""
        frame = cls(wire, False, level=0)
        frame._wire = wire
        return frame

    @property
    def wire(self) -> bytes:
        if self._wire is None:
            self._wire = build(OP_TEXT if self.text else OP_BINARY, self.data)
        return self._wire

    def deflated(self, wbits: int) -> bytes:
        """The frame for a connection that negotiated permessage-deflate with this window: compressed, RSV1 set,
        built once per window size; the plain frame when the message is too small to gain (RSV1 is per message)."""
        cache = self._deflated
        if cache is None:
            if not self.level or len(self.data) < DEFLATE_MIN:
                return self.wire
            cache = self._deflated = {}
        wire = cache.get(wbits)
        if wire is None:
            payload = deflate(self.data, wbits, self.level)
            wire = cache[wbits] = header(OP_TEXT if self.text else OP_BINARY, len(payload), RSV1) + payload
        return wire

    def wire_for(self, wbits: int) -> bytes:
        """The framing for a connection: plain (0), or deflated with that window."""
        return self.deflated(wbits) if wbits else self.wire

    @property
    def asgi(self) -> str | bytes:
        if not self.text:
            return self.data
        if self._str is None:
            self._str = self.data.decode()
        return self._str


class ProtocolError(Exception):
    """The client broke the framing rules: close with `code`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.messages: list[tuple[int, bytes]] = []  # complete messages that came before the broken frame


class FrameReader:
    """Turns a client's bytes into complete messages `(opcode, payload)`; fragments are joined.

    Control frames (ping, pong, close) come out as they arrive, even between the fragments of a message.
    A fragmented message's size counts each continuation frame whole (header and mask too), so empty
    continuations cannot grow a message for ever; at most `allowance` frames are read (a connection's budget,
    gateway.core.ratelimit.FrameBudget), past it ProtocolError 4029, so one read costs at most that many frames.
    With `inflate` (permessage-deflate was negotiated) a message whose first frame has RSV1 set is compressed:
    it comes out decompressed, at most `max_size` bytes either way.

    `client=True` reads the other side: a server's frames, which are not masked (one that is, is unmasked all
    the same). A server that did not agree to `server_no_context_takeover` compresses each message with the
    context of the ones before (`context_takeover=True`): they are inflated with one context for the connection.
    """

    __slots__ = (
        "max_size", "inflate", "client", "frames", "allowance", "progress", "_inflater", "_buffer", "_fragments",
        "_fragment_op", "_fragment_size", "_fragment_rsv1",
    )  # fmt: skip

    def __init__(
        self, max_size: int, inflate: bool = False, *, client: bool = False, context_takeover: bool = False
    ) -> None:
        self.max_size = max_size
        self.inflate = inflate
        self.client = client
        self.frames = 0  # frames read, control frames and fragments included
        self.allowance = float("inf")  # frames it may still read: past them, ProtocolError 4029
        # Frames that ended what was under way: a whole message, or a control frame between messages. While a
        # message is `unfinished` and this does not move, the client is holding it open (gateway.web.websocket.direct).
        self.progress = 0
        self._inflater = zlib.decompressobj(-15) if inflate and context_takeover else None
        self._buffer = b""
        self._fragments: bytearray | None = None
        self._fragment_op = 0
        self._fragment_size = 0
        self._fragment_rsv1 = False

    @property
    def buffered(self) -> int:
        """Bytes kept for the next feed: the start of a frame whose end has not arrived."""
        return len(self._buffer)

    @property
    def unfinished(self) -> bool:
        """A frame or a fragmented message has begun and not ended."""
        return self._fragments is not None or bool(self._buffer)

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """The complete messages in what has arrived. A broken frame raises ProtocolError, which carries the
        messages that came before it in the same read: they are still the client's, to be handled first."""
        messages: list[tuple[int, bytes]] = []
        try:
            return self._feed(data, messages)
        except ProtocolError as exc:
            exc.messages = messages
            self._buffer = b""
            raise

    def _feed(self, data: bytes, messages: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        buffer = self._buffer + data if self._buffer else data
        pos, end = 0, len(buffer)
        client, max_size = self.client, self.max_size  # read once: a benchmark client reads thousands of frames
        try:
            while end - pos >= 2:
                start = pos
                first, second = buffer[pos], buffer[pos + 1]
                fin, opcode, length = first & 0x80, first & 0x0F, second & 0x7F
                rsv = first & 0x70
                if rsv and (rsv != RSV1 or not self.inflate or opcode not in _DATA_OPS):
                    raise ProtocolError(1002, _reserved_bits(rsv, opcode, self.inflate))
                masked = second & 0x80
                if not masked and not client:
                    raise ProtocolError(1002, "client frames must be masked")
                at = pos + 2
                if length == 126:
                    if end - at < 2:
                        break
                    (length,) = struct.unpack_from("!H", buffer, at)
                    at += 2
                elif length == 127:
                    if end - at < 8:
                        break
                    (length,) = struct.unpack_from("!Q", buffer, at)
                    if length >> 63:
                        raise ProtocolError(1002, "the most significant bit of a 64-bit length must be 0")
                    at += 8
                if opcode in _CONTROL_OPS:
                    if not fin or length > 125:
                        raise ProtocolError(1002, "control frames are final and at most 125 bytes")
                elif opcode not in _DATA_OPS and opcode != OP_CONT:
                    raise ProtocolError(1002, f"unknown opcode {opcode}")
                elif opcode == OP_CONT:
                    # A continuation counts whole: 0-byte ones are not free (each still costs a frame to parse).
                    if at - pos + 4 * bool(masked) + length + self._fragment_size > max_size:
                        raise ProtocolError(1009, f"message larger than {max_size} bytes")
                elif length > max_size:
                    raise ProtocolError(1009, f"message larger than {max_size} bytes")
                if self.frames >= self.allowance:
                    raise ProtocolError(CLOSE_FLOOD, "too many frames: slow down")
                if masked:
                    if end - at < 4 + length:
                        break
                    payload = apply_mask(buffer[at + 4 : at + 4 + length], buffer[at : at + 4])
                    pos = at + 4 + length
                else:
                    if end - at < length:
                        break
                    payload = buffer[at : at + length]
                    pos = at + length
                self.frames += 1
                if (first == 0x81 or first == 0x82) and self._fragments is None:
                    messages.append((opcode, payload))  # the common case: a whole, uncompressed message
                    self.progress += 1
                    continue
                fragmented = self._fragments is not None
                message = self._message(opcode, bool(fin), bool(rsv), payload, pos - start)
                if message is not None:
                    messages.append(message)
                    if not fragmented or message[0] in _DATA_OPS:
                        self.progress += 1
        finally:
            self._buffer = buffer[pos:] if pos < end else b""
        if len(self._buffer) > max_size + 14:
            raise ProtocolError(1009, f"message larger than {max_size} bytes")
        return messages

    def _message(self, opcode: int, fin: bool, rsv1: bool, payload: bytes, wire: int) -> tuple[int, bytes] | None:
        """`wire`: the frame's whole length, which a continuation adds to its message's size."""
        if opcode in _CONTROL_OPS:
            return opcode, payload
        if opcode == OP_CONT:
            if self._fragments is None:
                raise ProtocolError(1002, "continuation frame without a message to continue")
            self._fragments += payload
            self._fragment_size += wire
            if not fin:
                return None
            opcode, payload, rsv1 = self._fragment_op, bytes(self._fragments), self._fragment_rsv1
            self._fragments, self._fragment_size = None, 0
        elif self._fragments is not None:
            raise ProtocolError(1002, "a new message began before the last one ended")
        elif not fin:
            self._fragments, self._fragment_op, self._fragment_size = bytearray(payload), opcode, len(payload)
            self._fragment_rsv1 = rsv1
            return None
        if not rsv1:
            return opcode, payload
        return opcode, inflate(payload, self.max_size, self._inflater)


def _reserved_bits(rsv: int, opcode: int, inflate: bool) -> str:
    if rsv != RSV1 or not inflate:
        return "reserved bits set (no extension was negotiated that defines them)"
    if opcode == OP_CONT:
        return "RSV1 is set on the first frame of a compressed message only"
    if opcode in _CONTROL_OPS:
        return "control frames are never compressed"
    return f"unknown opcode {opcode}"
