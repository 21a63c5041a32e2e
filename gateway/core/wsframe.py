"""Websocket framing without I/O (RFC 6455): shared outgoing frames and a reader of a client's frames.

A channel message is framed once and the same bytes are written to every subscriber: a server's frames are
not masked, so nothing in them depends on the connection. Client frames are masked and rare (subscribes,
pings); the reader unmasks them with websockets' C helper.
"""

from __future__ import annotations

import struct

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - the pure-Python fallback of the same function
    from websockets.utils import apply_mask

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_DATA_OPS = (OP_TEXT, OP_BINARY)
_CONTROL_OPS = (OP_CLOSE, OP_PING, OP_PONG)


def header(opcode: int, length: int) -> bytes:
    """The header of one unmasked, final frame."""
    if length < 126:
        return bytes((0x80 | opcode, length))
    if length < 1 << 16:
        return struct.pack("!BBH", 0x80 | opcode, 126, length)
    return struct.pack("!BBQ", 0x80 | opcode, 127, length)


def build(opcode: int, payload: bytes) -> bytes:
    return header(opcode, len(payload)) + payload


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
    connections the node writes itself) or its text (for connections behind the standard ASGI interface)."""

    __slots__ = ("data", "text", "_wire", "_str")

    def __init__(self, data: bytes, text: bool) -> None:
        self.data = data
        self.text = text
        self._wire: bytes | None = None
        self._str: str | None = None

    def __len__(self) -> int:
        return len(self.data)

    @classmethod
    def control(cls, wire: bytes) -> Frame:
        """A control frame (a pong) already framed, for the node's own websocket link only."""
        frame = cls(wire, False)
        frame._wire = wire
        return frame

    @property
    def wire(self) -> bytes:
        if self._wire is None:
            self._wire = build(OP_TEXT if self.text else OP_BINARY, self.data)
        return self._wire

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
    """

    __slots__ = ("max_size", "_buffer", "_fragments", "_fragment_op", "_fragment_size")

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._buffer = b""
        self._fragments: list[bytes] | None = None
        self._fragment_op = 0
        self._fragment_size = 0

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
        while end - pos >= 2:
            first, second = buffer[pos], buffer[pos + 1]
            fin, opcode, length = first & 0x80, first & 0x0F, second & 0x7F
            if first & 0x70:
                raise ProtocolError(1002, "reserved bits set (no extension was negotiated)")
            if not second & 0x80:
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
            elif length + self._fragment_size > self.max_size:
                raise ProtocolError(1009, f"message larger than {self.max_size} bytes")
            if end - at < 4 + length:
                break
            mask = buffer[at : at + 4]
            payload = apply_mask(buffer[at + 4 : at + 4 + length], mask)
            pos = at + 4 + length
            message = self._message(opcode, bool(fin), payload)
            if message is not None:
                messages.append(message)
        self._buffer = buffer[pos:] if pos < end else b""
        if len(self._buffer) > self.max_size + 14:
            raise ProtocolError(1009, f"message larger than {self.max_size} bytes")
        return messages

    def _message(self, opcode: int, fin: bool, payload: bytes) -> tuple[int, bytes] | None:
        if opcode in _CONTROL_OPS:
            return opcode, payload
        if opcode == OP_CONT:
            if self._fragments is None:
                raise ProtocolError(1002, "continuation frame without a message to continue")
            self._fragments.append(payload)
            self._fragment_size += len(payload)
            if not fin:
                return None
            message = (self._fragment_op, b"".join(self._fragments))
            self._fragments, self._fragment_size = None, 0
            return message
        if self._fragments is not None:
            raise ProtocolError(1002, "a new message began before the last one ended")
        if fin:
            return opcode, payload
        self._fragments, self._fragment_op, self._fragment_size = [payload], opcode, len(payload)
        return None
