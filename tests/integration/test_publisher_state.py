"""A team channel's stored state carries the sequence of the channel's last message, events included.

A node's team snapshot takes its seq from the state; an event published after the last state change (a
glow, a notice) must move that seq too, or a subscriber whose snapshot came after the event would hold
the older seq and see the next message as a gap (found by the benchmark's subscribers while connecting).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from redis.asyncio import Redis

from gateway.bus import keys
from gateway.bus.connection import Bus
from gateway.bus.errors import BusRefused, BusUnavailable
from gateway.bus.publisher import Fenced, Publisher
from gateway.core import envelope
from gateway.core.publication import Publication


async def test_an_event_moves_the_seq_of_the_channels_state(redis_url: str) -> None:
    bus = Bus(redis_url.rsplit("/", 1)[0] + "/9")  # keys of its own: the session's relay keeps its fence in db 0
    redis = bus.redis
    tag = bus.partitions.tags[0]
    try:
        epoch = 1
        channel = f"team:{10**9 + secrets.randbelow(10**6)}"
        publisher = Publisher(bus, tag, epoch, 100, 60)
        await publisher.take_over()
        await publisher.publish(
            [Publication(channel=channel, epoch=epoch, seq=1, json=b"{}", msgpack=b"\x80", state_set={"counts": b"c1"})]
        )
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


async def test_a_cycle_bigger_than_one_call_is_published_whole_and_in_order(redis_url: str) -> None:
    """A cycle goes out as one script call, split into several past CALL_BYTES: every message is published,
    kept in the history (its MessagePack payload, cut from the envelope by the script) and the channels'
    state updated, and the relay's cursor is written once, after the last message."""
    bus = Bus(redis_url.rsplit("/", 1)[0] + "/9")
    redis = bus.redis
    tag = bus.partitions.tags[0]
    listener = redis.pubsub()
    try:
        epoch = 3
        trajectory = f"trajectory:{10**9 + secrets.randbelow(10**6)}"
        team = f"team:{10**9 + secrets.randbelow(10**6)}"
        await listener.subscribe(keys.pubsub(tag, trajectory), keys.pubsub(tag, team))
        await listener.get_message(timeout=1.0)
        await listener.get_message(timeout=1.0)
        publisher = Publisher(bus, tag, epoch, 100, 60)
        await publisher.take_over()
        big = [b"\xc6" + (n * 7).to_bytes(4, "big") + bytes([n]) * 300_000 for n in range(1, 6)]  # 1.5 MB in all
        cycle = [
            Publication(channel=trajectory, epoch=epoch, seq=n, json=b"[]", msgpack=payload)
            for n, payload in enumerate(big, 1)
        ]
        cycle.append(
            Publication(
                channel=team,
                epoch=epoch,
                seq=8,
                json=b"{}",
                msgpack=b"\x80",
                state_set={"counts": b"c2", "t:1": b"s1"},
                state_del=["t:2"],
            )
        )
        await redis.hset(keys.state(tag, team), mapping={"t:2": b"gone", "counts": b"c1"})
        await publisher.publish(cycle, relay_cursor="77:12")

        history = await redis.xrange(keys.history(tag, trajectory))
        assert [entry_id for entry_id, _ in history] == [f"{n}-0".encode() for n in range(1, 6)]
        assert [fields[b"m"] for _, fields in history] == big
        assert await redis.get(keys.seq(tag, trajectory)) == b"3-5"
        state = await redis.hgetall(keys.state(tag, team))
        assert state == {b"seq": b"8", b"epoch": b"3", b"counts": b"c2", b"t:1": b"s1"}
        assert await redis.get(keys.relay_cursor(tag)) == b"77:12"
        received = []
        while len(received) < 6:
            message = await listener.get_message(timeout=2.0)
            assert message is not None, f"only {len(received)} of 6 messages published"
            if message["type"] == "message":
                received.append(envelope.unpack(message["data"]))
        assert [(e.seq, e.msgpack) for e in received] == [*((n, p) for n, p in enumerate(big, 1)), (8, b"\x80")]
    finally:
        await listener.aclose()
        await redis.flushdb()
        await bus.aclose()


async def test_a_fenced_out_relay_publishes_nothing_of_its_cycle(redis_url: str) -> None:
    bus = Bus(redis_url.rsplit("/", 1)[0] + "/9")
    redis = bus.redis
    tag = bus.partitions.tags[0]
    try:
        channel = f"trajectory:{10**9 + secrets.randbelow(10**6)}"
        old, new = Publisher(bus, tag, 4, 100, 60), Publisher(bus, tag, 5, 100, 60)
        await old.take_over()
        await new.take_over()
        with pytest.raises(Fenced):
            await old.publish(
                [Publication(channel=channel, epoch=4, seq=1, json=b"[]", msgpack=b"\x90")], relay_cursor="9:9"
            )
        assert not await redis.exists(keys.history(tag, channel), keys.seq(tag, channel), keys.relay_cursor(tag))
    finally:
        await redis.flushdb()
        await bus.aclose()


@asynccontextmanager
async def trajectory_publisher(redis_url: str) -> AsyncIterator[tuple[Publisher, Redis, str, str]]:
    """A publisher that has taken over, on a scratch database, with a fresh trajectory channel to publish on."""
    bus = Bus(redis_url.rsplit("/", 1)[0] + "/9")
    tag = bus.partitions.tags[0]
    try:
        publisher = Publisher(bus, tag, 1, 100, 60)
        await publisher.take_over()
        yield publisher, bus.redis, tag, f"trajectory:{10**9 + secrets.randbelow(10**6)}"
    finally:
        await bus.redis.flushdb()
        await bus.aclose()


def message(channel: str, seq: int) -> list[Publication]:
    return [Publication(channel=channel, epoch=1, seq=seq, json=b"[]", msgpack=b"\x90")]


async def test_a_cycle_goes_out_after_redis_cut_the_publishers_connection(redis_url: str) -> None:
    """The publisher writes on a connection of the pool: when Redis has closed it (a restart, a `CLIENT KILL`,
    an idle timeout), the cycle fails with BusUnavailable at most once, and the same cycle sent again (as the
    relay's cycle does) goes out, once, on a connection in step for the next one."""
    async with trajectory_publisher(redis_url) as (publisher, redis, tag, channel):
        await publisher.publish(message(channel, 1))
        killer = Redis.from_url(redis_url)
        try:
            assert await killer.client_kill_filter(_type="normal", skipme=True) >= 1  # the bus's connections
        finally:
            await killer.aclose()
        try:
            await publisher.publish(message(channel, 2))
        except BusUnavailable:
            await publisher.publish(message(channel, 2))
        await publisher.publish(message(channel, 3))
        entries = await redis.xrange(keys.history(tag, channel))
        assert [entry_id for entry_id, _ in entries] == [b"1-0", b"2-0", b"3-0"]
        assert await redis.get(keys.seq(tag, channel)) == b"1-3"


async def test_a_cycle_goes_out_after_redis_lost_its_scripts(redis_url: str) -> None:
    """A Redis that restarted has no scripts: the cycle's call is refused as a whole (NOSCRIPT), the script is
    loaded and the cycle runs again, and the connection is still in step for the next one."""
    async with trajectory_publisher(redis_url) as (publisher, redis, tag, channel):
        await redis.script_flush()
        await publisher.publish(message(channel, 1))
        await publisher.publish(message(channel, 2))
        assert await redis.get(keys.seq(tag, channel)) == b"1-2"
        assert len(await redis.xrange(keys.history(tag, channel))) == 2


async def test_a_cycle_the_script_fails_on_is_an_error_not_a_publish(redis_url: str) -> None:
    """A key of the partition's that another client overwrote with the wrong type (here the channel's state, a
    string where the script writes a hash) fails the script part-way: the publish raises Redis's error, so the
    relay keeps the cycle and retries it, rather than counting it as published; the connection stays in step."""
    async with trajectory_publisher(redis_url) as (publisher, redis, tag, channel):
        team = f"team:{10**9 + secrets.randbelow(10**6)}"
        await redis.set(keys.state(tag, team), b"not a hash")
        summary = Publication(channel=team, epoch=1, seq=1, json=b"{}", msgpack=b"\x80", state_set={"counts": b"c"})
        with pytest.raises(BusRefused, match="WRONGTYPE"):
            await publisher.publish([summary])
        await redis.delete(keys.state(tag, team))
        await publisher.publish([summary])  # the relay's retry, once the key is its own again
        assert await redis.hgetall(keys.state(tag, team)) == {b"seq": b"1", b"epoch": b"1", b"counts": b"c"}
        await publisher.publish(message(channel, 1))
        assert await redis.get(keys.seq(tag, channel)) == b"1-1"
