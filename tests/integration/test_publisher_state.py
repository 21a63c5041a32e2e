"""A team channel's stored state carries the sequence of the channel's last message, events included.

A node's team snapshot takes its seq from the state; an event published after the last state change (a
glow, a notice) must move that seq too, or a subscriber whose snapshot came after the event would hold
the older seq and see the next message as a gap (found by the benchmark's subscribers while connecting).
"""

from __future__ import annotations

import secrets

from gateway.bus import keys
from gateway.bus.connection import Bus
from gateway.bus.publisher import Publisher
from gateway.core.relay import Publication


async def test_an_event_moves_the_seq_of_the_channels_state(redis_url: str) -> None:
    bus = Bus(redis_url.rsplit("/", 1)[0] + "/9")  # keys of its own: the session's relay keeps its fence in db 0
    redis = bus.redis
    tag = bus.partitions.tags[0]
    try:
        epoch = 1
        channel = f"team:{10**9 + secrets.randbelow(10**6)}"
        publisher = Publisher(bus, tag, epoch, 100, 60)
        await publisher.take_over()
        await publisher.publish([Publication(channel=channel, epoch=epoch, seq=1, json=b"{}", msgpack=b"\x80",
                                             state_set={"counts": b"c1"})])
        await publisher.publish([Publication(channel=channel, epoch=epoch, seq=2, json=b"{}", msgpack=b"\x80")])
        state = await redis.hgetall(keys.state(tag, channel))
        assert state[b"seq"] == b"2" and state[b"counts"] == b"c1"
        # A channel without stored state (a trajectory's) gets none from an event.
        other = f"trajectory:{10**9 + secrets.randbelow(10**6)}"
        await publisher.publish([Publication(channel=other, epoch=epoch, seq=1, json=b"{}", msgpack=b"\x80")])
        assert not await redis.exists(keys.state(tag, other))
    finally:
        await redis.flushdb()
        await bus.aclose()
