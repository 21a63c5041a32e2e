"""The bus envelope: its header, its publish time, and the payload the publish script cuts from its tail."""

from __future__ import annotations

import msgspec

from gateway.core import envelope


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


def test_an_envelope_from_a_relay_before_the_publish_time_still_decodes() -> None:
    legacy = msgspec.msgpack.encode([3, 7, b"{}", b"\x80"])
    env = envelope.unpack(legacy)
    assert (env.epoch, env.seq, env.published, env.json, env.msgpack) == (3, 7, 0.0, b"{}", b"\x80")
    assert envelope.published_at(legacy) == 0.0
