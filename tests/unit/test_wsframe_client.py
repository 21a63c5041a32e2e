"""The frame reader in client mode: a server's unmasked frames, as the benchmark's subscribers read them."""

from __future__ import annotations

import os
import zlib

import pytest

from gateway.core.wsframe import (
    OP_BINARY,
    OP_CONT,
    OP_PING,
    OP_TEXT,
    RSV1,
    FrameReader,
    ProtocolError,
    build,
    deflate,
    header,
)


def fragment(opcode: int, payload: bytes, fin: bool) -> bytes:
    frame = build(opcode, payload)
    return frame if fin else bytes((frame[0] & 0x7F,)) + frame[1:]


def masked(opcode: int, payload: bytes) -> bytes:
    key = os.urandom(4)
    frame = build(opcode, payload)
    n = len(frame) - len(payload)
    return bytes((frame[0], frame[1] | 0x80)) + frame[2:n] + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


@pytest.mark.parametrize("size", [0, 125, 126, 65535, 65536, 70000])
def test_a_servers_unmasked_frames_are_read_at_every_length(size: int) -> None:
    reader = FrameReader(1 << 20, client=True)
    payload = bytes(i & 0xFF for i in range(size))
    assert reader.feed(build(OP_BINARY, payload)) == [(OP_BINARY, payload)]
    assert reader.buffered == 0 and reader.frames == 1


def test_the_server_side_reader_still_refuses_unmasked_frames() -> None:
    with pytest.raises(ProtocolError, match="must be masked") as refused:
        FrameReader(1 << 20).feed(build(OP_TEXT, b"x"))
    assert refused.value.code == 1002


def test_a_masked_frame_from_a_server_is_unmasked_all_the_same() -> None:
    assert FrameReader(1024, client=True).feed(masked(OP_TEXT, b"hello")) == [(OP_TEXT, b"hello")]


def test_frames_split_anywhere_come_out_whole_and_the_rest_waits() -> None:
    reader = FrameReader(1 << 20, client=True)
    data = build(OP_TEXT, b"x" * 300) + build(OP_TEXT, b"y" * 70000) + build(OP_TEXT, b"z")
    out = []
    for i in range(0, len(data), 7):
        out += reader.feed(data[i : i + 7])
        assert reader.buffered < 70000 + 10
    assert out == [(OP_TEXT, b"x" * 300), (OP_TEXT, b"y" * 70000), (OP_TEXT, b"z")] and reader.buffered == 0


def test_every_frame_is_counted_control_frames_and_fragments_included() -> None:
    reader = FrameReader(1024, client=True)
    data = fragment(OP_TEXT, b"a", False) + build(OP_PING, b"hb") + fragment(OP_CONT, b"b", True)
    assert reader.feed(data) == [(OP_PING, b"hb"), (OP_TEXT, b"ab")]
    assert reader.frames == 3


def test_messages_before_a_broken_frame_are_kept_on_the_error() -> None:
    reader = FrameReader(1024, client=True)
    with pytest.raises(ProtocolError) as broken:
        reader.feed(build(OP_TEXT, b"fine") + build(OP_CONT, b"orphan"))
    assert broken.value.code == 1002 and broken.value.messages == [(OP_TEXT, b"fine")]


def test_a_message_over_the_limit_is_1009_from_its_header() -> None:
    with pytest.raises(ProtocolError) as big:
        FrameReader(100, client=True).feed(header(OP_TEXT, 101))
    assert big.value.code == 1009


def test_rsv1_without_compression_negotiated_is_1002() -> None:
    frame = header(OP_TEXT, 3, RSV1) + b"abc"
    with pytest.raises(ProtocolError) as broken:
        FrameReader(1024, client=True).feed(frame)
    assert broken.value.code == 1002


def test_each_compressed_message_inflates_alone_without_context_takeover() -> None:
    reader = FrameReader(1 << 20, inflate=True, client=True)
    text = b'{"jobs": [' + b'{"id": 1, "status": "running"}, ' * 100 + b"{}]}"
    payload = deflate(text)
    frame = header(OP_TEXT, len(payload), RSV1) + payload
    assert reader.feed(frame + build(OP_TEXT, b"plain") + frame) == [
        (OP_TEXT, text),
        (OP_TEXT, b"plain"),
        (OP_TEXT, text),
    ]


def test_a_server_that_keeps_its_context_is_inflated_with_one_context() -> None:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    frames = b""
    for _ in range(2):
        payload = (compressor.compress(b"hello " * 50) + compressor.flush(zlib.Z_SYNC_FLUSH))[:-4]
        frames += header(OP_TEXT, len(payload), RSV1) + payload
    reader = FrameReader(1 << 20, inflate=True, client=True, context_takeover=True)
    assert reader.feed(frames) == [(OP_TEXT, b"hello " * 50)] * 2
    with pytest.raises(ProtocolError):  # without the context the second message refers back to nothing
        FrameReader(1 << 20, inflate=True, client=True).feed(frames)
