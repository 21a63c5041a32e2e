"""Websocket framing: shared frames are built once; client frames are unmasked, joined, and checked."""

from __future__ import annotations

import os
import struct

import pytest

from gateway.core.wsframe import OP_BINARY, OP_CLOSE, OP_CONT, OP_PING, OP_TEXT, Frame, FrameReader, ProtocolError, build
from gateway.core.wsframe import close_frame, parse_close, sendable_close_code


def masked(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536])
def test_a_shared_frame_has_the_right_length_header(size: int) -> None:
    frame = Frame(b"x" * size, text=True)
    wire = frame.wire
    assert wire[0] == 0x81 and wire.endswith(frame.data) and len(wire) - size in (2, 4, 10)
    assert frame.wire is wire  # built once
    assert frame.asgi == "x" * size and Frame(b"\x00", text=False).asgi == b"\x00"


def test_messages_split_anywhere_come_out_whole_and_in_order() -> None:
    data = masked(OP_TEXT, b"hello") + masked(OP_BINARY, b"\x01" * 300) + masked(OP_TEXT, b"z" * 70000)
    reader = FrameReader(max_size=1 << 20)
    out = []
    for i in range(0, len(data), 7):
        out += reader.feed(data[i : i + 7])
    assert out == [(OP_TEXT, b"hello"), (OP_BINARY, b"\x01" * 300), (OP_TEXT, b"z" * 70000)]


def test_fragments_are_joined_and_control_frames_pass_between_them() -> None:
    reader = FrameReader(max_size=100)
    data = masked(OP_TEXT, b"ab", fin=False) + masked(OP_PING, b"p") + masked(OP_CONT, b"cd", fin=False) + masked(OP_CONT, b"e")
    assert reader.feed(data) == [(OP_PING, b"p"), (OP_TEXT, b"abcde")]


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (build(OP_TEXT, b"not masked"), 1002),
        (masked(OP_TEXT, b"x" * 101), 1009),
        (masked(OP_TEXT, b"x" * 60, fin=False) + masked(OP_CONT, b"x" * 60), 1009),
        (masked(OP_PING, b"x" * 126), 1002),
        (masked(OP_CLOSE, b"\x03\xe8", fin=False), 1002),
        (masked(OP_CONT, b"x"), 1002),
        (masked(OP_TEXT, b"a", fin=False) + masked(OP_TEXT, b"b"), 1002),
        (masked(0x3, b"x"), 1002),
        (bytes([0xC1]) + masked(OP_TEXT, b"x")[1:], 1002),
        (bytes([0x81, 0x80 | 127]) + struct.pack("!Q", 1 << 63) + b"\0\0\0\0", 1002),  # a 64-bit length's top bit
    ],
)
def test_broken_framing_is_refused_with_the_right_close_code(data: bytes, code: int) -> None:
    with pytest.raises(ProtocolError) as info:
        FrameReader(max_size=100).feed(data)
    assert info.value.code == code


def test_an_oversized_length_is_refused_before_its_payload_arrives() -> None:
    head = bytes([0x81, 0x80 | 127]) + struct.pack("!Q", 1 << 40)
    with pytest.raises(ProtocolError) as info:
        FrameReader(max_size=1 << 16).feed(head + b"mask")
    assert info.value.code == 1009


def test_messages_before_a_broken_frame_in_the_same_read_are_still_delivered() -> None:
    reader = FrameReader(max_size=100)
    with pytest.raises(ProtocolError) as info:
        reader.feed(masked(OP_TEXT, b'{"type": "ping", "id": 1}') + masked(OP_PING, b"p") + build(OP_TEXT, b"not masked"))
    assert info.value.code == 1002
    assert info.value.messages == [(OP_TEXT, b'{"type": "ping", "id": 1}'), (OP_PING, b"p")]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"", (None, "")),
        (struct.pack("!H", 1000), (1000, "")),
        (struct.pack("!H", 4999) + "fin ✓".encode(), (4999, "fin ✓")),
        (b"\x03", 1002),
        *((struct.pack("!H", code), 1002) for code in (0, 999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535)),
        (struct.pack("!H", 1000) + b"\xc3", 1007),
    ],
)
def test_a_peers_close_payload_is_read_or_refused(payload: bytes, expected: object) -> None:
    if isinstance(expected, int):
        with pytest.raises(ProtocolError) as info:
            parse_close(payload)
        assert info.value.code == expected
    else:
        assert parse_close(payload) == expected


def test_the_node_never_frames_a_reserved_close_code() -> None:
    assert [c for c in range(65536) if sendable_close_code(c)] == [*range(1000, 1004), *range(1007, 1015), *range(3000, 5000)]
    with pytest.raises(AssertionError):
        close_frame(1005)
    assert parse_close(close_frame(1000, "é" * 100)[2:])[1] == "é" * 60  # cut to 120 bytes, still UTF-8
