"""The bus envelope: its header, its publish time, the payload the publish script cuts from its tail, and a
message's frame for subscribers of each format."""

from __future__ import annotations

import msgspec

from gateway.core import envelope
from gateway.core.envelope import message_frame
from gateway.core.protocol import Batch, encode_both, make_cursor

BATCH = Batch(channel="trajectory:4", seq=9, cursor=make_cursor(3, 9), jobs=[])


def test_the_msgpack_payload_is_the_envelopes_tail() -> None:
    # The relay's Lua script stores `string.sub(env, -#payload)` as the history entry (gateway.bus.publisher).
    payload = msgspec.msgpack.encode({"type": "batch", "seq": 7})
    data = envelope.pack(3, 7, b'{"type":"batch"}', payload, published=1_700_000_000.25)
    assert data[-len(payload) :] == payload


def test_the_publish_time_travels_and_can_be_read_alone() -> None:
    data = envelope.pack(3, 7, b"{}", b"\x80", published=1_700_000_000.25)
    env = envelope.unpack(data)
    assert (env.epoch, env.seq, env.published, env.json, env.msgpack) == (3, 7, 1_700_000_000.25, b"{}", b"\x80")
    assert envelope.published_at(data) == 1_700_000_000.25


def test_the_commit_time_travels_beside_the_publish_time() -> None:
    # A node measures commit to write (gateway_delivery_lag_seconds) from it, without decoding the payloads.
    data = envelope.pack(3, 7, b"{}", b"\x80", published=1_700_000_000.25, committed=1_700_000_000.0)
    assert envelope.unpack(data).committed == 1_700_000_000.0
    assert envelope.stamps(data) == (1_700_000_000.25, 1_700_000_000.0)


def test_an_envelope_from_a_relay_before_the_commit_time_still_decodes() -> None:
    older = msgspec.msgpack.encode([3, 7, 1_700_000_000.25, b"{}", b"\x80"])
    env = envelope.unpack(older)
    assert (env.epoch, env.seq, env.published, env.committed, env.msgpack) == (3, 7, 1_700_000_000.25, 0.0, b"\x80")
    assert envelope.stamps(older) == (0.0, 0.0)


def test_an_envelope_from_a_relay_before_the_publish_time_still_decodes() -> None:
    legacy = msgspec.msgpack.encode([3, 7, b"{}", b"\x80"])
    env = envelope.unpack(legacy)
    assert (env.epoch, env.seq, env.published, env.json, env.msgpack) == (3, 7, 0.0, b"{}", b"\x80")
    assert envelope.published_at(legacy) == 0.0


def test_a_message_is_framed_as_msgpack_untouched_and_as_json_as_the_relay_encoded_it() -> None:
    as_json, as_msgpack = encode_both(BATCH)
    binary = message_frame(as_msgpack, "msgpack", as_json)
    assert (binary.data, binary.text) == (as_msgpack, False) and binary.data is as_msgpack
    text = message_frame(as_msgpack, "json", as_json)
    assert (text.data, text.text) == (as_json, True) and text.data is as_json  # the bus's JSON, not a transcoding


def test_a_history_message_has_no_json_and_is_transcoded_to_the_same_bytes() -> None:
    # The history keeps MessagePack alone: a client reading JSON gets what live delivery would have sent.
    as_json, as_msgpack = encode_both(BATCH)
    text = message_frame(as_msgpack, "json")
    assert (text.data, text.text) == (as_json, True)
    assert message_frame(as_msgpack, "msgpack").wire == message_frame(as_msgpack, "msgpack", as_json).wire


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_traced_envelope_carries_its_traceparent_and_keeps_the_payload_as_its_tail() -> None:
    payload = msgspec.msgpack.encode({"type": "batch", "seq": 7})
    data = envelope.pack(3, 7, b"{}", payload, published=1.5, committed=1.25, trace=TRACEPARENT)
    assert data[-len(payload) :] == payload
    env = envelope.unpack(data)
    assert (env.epoch, env.seq, env.published, env.committed, env.json, env.msgpack) == (
        3,
        7,
        1.5,
        1.25,
        b"{}",
        payload,
    )
    assert envelope.stamps(data) == (1.5, 1.25)
    assert envelope.trace_of(data) == TRACEPARENT


def test_an_untraced_envelope_is_what_it_was_and_has_no_trace() -> None:
    # Tracing off costs nothing on the bus: the same bytes as before traces existed.
    data = envelope.pack(3, 7, b"{}", b"\x80", published=1.5, committed=1.25)
    assert data == msgspec.msgpack.encode([3, 7, 1.5, 1.25, b"{}", b"\x80"])
    assert envelope.trace_of(data) is None
