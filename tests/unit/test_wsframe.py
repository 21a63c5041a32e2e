"""Websocket framing: shared frames are built once (plain and deflated); client frames are unmasked, joined,
inflated and checked."""

from __future__ import annotations

import os
import struct
import zlib

import pytest

from gateway.core.wsframe import (
    DEFLATE_MIN,
    OP_BINARY,
    OP_CLOSE,
    OP_CONT,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    Frame,
    FrameReader,
    ProtocolError,
    build,
    close_frame,
    deflate,
    parse_close,
    sendable_close_code,
)


def masked(opcode: int, payload: bytes, fin: bool = True, rsv: int = 0) -> bytes:
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | rsv | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


@pytest.mark.parametrize(
    "size, header",
    [
        (0, b"\x81\x00"),
        (125, b"\x81\x7d"),  # the largest length that fits the 7-bit field
        (126, b"\x81\x7e\x00\x7e"),  # the smallest that needs the 16-bit one
        (65535, b"\x81\x7e\xff\xff"),  # the largest 16-bit length
        (65536, b"\x81\x7f" + (65536).to_bytes(8, "big")),  # the smallest that needs the 64-bit one
    ],
)
def test_a_shared_frame_has_the_right_length_header(size: int, header: bytes) -> None:
    frame = Frame(b"x" * size, text=True)
    wire = frame.wire
    assert bytes(wire[: len(header)]) == header and len(wire) == len(header) + size and wire.endswith(frame.data)
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
    data = (
        masked(OP_TEXT, b"ab", fin=False)
        + masked(OP_PING, b"p")
        + masked(OP_CONT, b"cd", fin=False)
        + masked(OP_CONT, b"e")
    )
    assert reader.feed(data) == [(OP_PING, b"p"), (OP_TEXT, b"abcde")]


def test_empty_continuations_count_whole_so_a_message_cannot_grow_for_ever() -> None:
    """10,000,000 empty continuations grew a node by 76 MiB: they added 0 bytes to the message's size. Each
    counts its frame now (2 bytes of header and 4 of mask), so a 100-byte bound takes 16 of them at most."""
    reader = FrameReader(max_size=100)
    assert reader.feed(masked(OP_TEXT, b"a", fin=False) + masked(OP_CONT, b"", fin=False) * 16) == []
    with pytest.raises(ProtocolError) as info:
        reader.feed(masked(OP_CONT, b"", fin=False))
    assert info.value.code == 1009
    # What a client may really send: a message in a few fragments, each counted with its header.
    whole = FrameReader(max_size=100).feed(
        masked(OP_TEXT, b"x" * 40, fin=False) + masked(OP_CONT, b"y" * 40, fin=False) + masked(OP_CONT, b"z" * 8)
    )
    assert whole == [(OP_TEXT, b"x" * 40 + b"y" * 40 + b"z" * 8)]


def test_a_read_parses_no_more_frames_than_the_allowance_and_keeps_what_came_before() -> None:
    reader = FrameReader(max_size=100)
    reader.allowance = 3
    with pytest.raises(ProtocolError) as info:
        reader.feed(masked(OP_PONG, b"") * 2 + masked(OP_TEXT, b"hi") + masked(OP_PONG, b"") * 1000)
    assert info.value.code == 4029 and reader.frames == 3
    assert info.value.messages == [(OP_PONG, b""), (OP_PONG, b""), (OP_TEXT, b"hi")]


def test_an_unfinished_message_makes_no_progress_until_it_ends() -> None:
    """What the link's deadline watches: control frames between fragments do not count as progress."""
    reader = FrameReader(max_size=100)
    reader.feed(masked(OP_TEXT, b"a"))
    assert (reader.unfinished, reader.progress) == (False, 1)
    reader.feed(masked(OP_TEXT, b"b", fin=False) + masked(OP_PONG, b"") + masked(OP_CONT, b"", fin=False))
    assert (reader.unfinished, reader.progress) == (True, 1)
    reader.feed(masked(OP_CONT, b"c"))
    assert (reader.unfinished, reader.progress) == (False, 2)
    reader.feed(masked(OP_PONG, b"") + masked(OP_TEXT, b"half")[:5])  # a frame begun: unfinished too
    assert (reader.unfinished, reader.progress) == (True, 3)


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
    # named, not shown: the masks are random, and pytest-xdist's workers must collect the same ids
    ids=[
        "unmasked",
        "message-over-max",
        "fragments-over-max",
        "long-ping",
        "fragmented-close",
        "continuation-first",
        "text-inside-a-message",
        "unknown-opcode",
        "reserved-bit",
        "length-top-bit",
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
        reader.feed(
            masked(OP_TEXT, b'{"type": "ping", "id": 1}') + masked(OP_PING, b"p") + build(OP_TEXT, b"not masked")
        )
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
    assert [c for c in range(65536) if sendable_close_code(c)] == [
        *range(1000, 1004),
        *range(1007, 1015),
        *range(3000, 5000),
    ]
    with pytest.raises(AssertionError):
        close_frame(1005)
    assert parse_close(close_frame(1000, "é" * 100)[2:])[1] == "é" * 60  # cut to 120 bytes, still UTF-8


# -- permessage-deflate

JSON = (
    b'{"type":"batch","channel":"trajectory:42","jobs":['
    + b",".join(
        b'{"id":%d,"status":"running","version":3,"kind":"analysis","name":"Radial Distribution Function"}' % i
        for i in range(40)
    )
    + b"]}"
)


def parse_server_frame(wire: bytes) -> tuple[int, bool, bytes]:
    """(opcode, rsv1, payload) of one unmasked frame."""
    length, at = wire[1] & 0x7F, 2
    if length == 126:
        (length,), at = struct.unpack_from("!H", wire, 2), 4
    elif length == 127:
        (length,), at = struct.unpack_from("!Q", wire, 2), 10
    assert len(wire) == at + length and wire[0] & 0x80
    return wire[0] & 0x0F, bool(wire[0] & 0x40), wire[at:]


def client_inflate(payload: bytes) -> bytes:
    """What a client does with a compressed message (RFC 7692 7.2.2), with a fresh context."""
    return zlib.decompressobj(-15).decompress(payload + b"\x00\x00\xff\xff")


@pytest.mark.parametrize("text", [True, False])
def test_a_deflated_frame_has_rsv1_and_inflates_to_the_message(text: bool) -> None:
    frame = Frame(JSON, text=text)
    opcode, rsv1, payload = parse_server_frame(frame.deflated(15))
    assert opcode == (OP_TEXT if text else OP_BINARY) and rsv1
    assert client_inflate(payload) == JSON and len(payload) < len(JSON) / 4


def test_a_frame_is_deflated_once_per_window_and_the_same_bytes_serve_everyone() -> None:
    frame = Frame(JSON, text=True)
    wire = frame.deflated(15)
    assert frame.deflated(15) is wire and frame.wire_for(15) is wire
    small_window = frame.deflated(9)
    assert small_window is not wire and client_inflate(parse_server_frame(small_window)[2]) == JSON
    assert frame.wire_for(0) is frame.wire and not frame.wire[0] & 0x40


def test_a_message_compresses_to_the_same_bytes_wherever_it_was_compressed() -> None:
    """server_no_context_takeover: nothing of one message's compression depends on what came before."""
    assert Frame(JSON, text=True).deflated(15) == Frame(JSON, text=True).deflated(15) == Frame(JSON, True).wire_for(15)
    assert deflate(JSON) == deflate(JSON)


def test_small_messages_and_control_frames_go_uncompressed() -> None:
    small = Frame(b"x" * (DEFLATE_MIN - 1), text=True)
    assert small.deflated(15) is small.wire
    pong = Frame.control(build(OP_PONG, b"p" * 125))
    assert pong.deflated(15) is pong.wire
    assert Frame(b"x" * DEFLATE_MIN, text=True).deflated(15)[0] == 0xC1  # FIN, RSV1, text


def test_compressed_client_messages_are_inflated_whole_or_fragmented() -> None:
    reader = FrameReader(max_size=1 << 16, inflate=True)
    z = deflate(JSON)
    data = masked(OP_TEXT, z, rsv=0x40) + masked(OP_TEXT, b"plain")  # RSV1 is per message
    data += masked(OP_BINARY, z[:10], fin=False, rsv=0x40) + masked(OP_PING, b"p") + masked(OP_CONT, z[10:])
    data += masked(OP_TEXT, deflate(b""), rsv=0x40)
    out = []
    for i in range(0, len(data), 5):  # split anywhere
        out += reader.feed(data[i : i + 5])
    assert out == [(OP_TEXT, JSON), (OP_TEXT, b"plain"), (OP_PING, b"p"), (OP_BINARY, JSON), (OP_TEXT, b"")]


@pytest.mark.parametrize(
    ("data", "inflate", "code"),
    [
        (masked(OP_TEXT, deflate(b"hi"), rsv=0x40), False, 1002),  # RSV1 without compression negotiated
        (masked(OP_TEXT, b"a", fin=False, rsv=0x40) + masked(OP_CONT, b"b", rsv=0x40), True, 1002),  # on a continuation
        (masked(OP_PING, b"p", rsv=0x40), True, 1002),  # on a control frame
        (masked(OP_TEXT, b"x", rsv=0x20), True, 1002),  # RSV2 means nothing here
        (masked(OP_TEXT, b"\xff\xff\xff\xff", rsv=0x40), True, 1002),  # not DEFLATE data
        (masked(OP_TEXT, deflate(b"\0" * 1_000_000), rsv=0x40), True, 1009),  # a bomb: 1 MB from about 1 KB
        (masked(OP_TEXT, deflate(b"x" * 101), rsv=0x40), True, 1009),  # just over the bound once inflated
    ],
    ids=["rsv1-not-negotiated", "rsv1-continuation", "rsv1-control", "rsv2", "not-deflate", "bomb", "one-over"],
)
def test_bad_compressed_frames_are_refused_with_the_right_close_code(data: bytes, inflate: bool, code: int) -> None:
    with pytest.raises(ProtocolError) as info:
        FrameReader(max_size=100, inflate=inflate).feed(data)
    assert info.value.code == code


def test_a_compressed_message_of_exactly_the_bound_is_taken() -> None:
    assert FrameReader(max_size=100, inflate=True).feed(masked(OP_TEXT, deflate(b"x" * 100), rsv=0x40)) == [
        (OP_TEXT, b"x" * 100)
    ]
