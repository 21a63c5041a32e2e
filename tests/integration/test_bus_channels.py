"""The bus's two broadcast paths against a real Redis: a cluster's command inbox and the announcements."""

from __future__ import annotations

import asyncio
import secrets
import time

from redis.asyncio import Redis

from gateway.bus import keys
from gateway.bus.announcements import RedisAnnouncements
from gateway.bus.clients import POOL_CONNECTIONS
from gateway.bus.commands import RedisCommands
from gateway.bus.connection import Bus
from gateway.bus.events import MembershipsChanged
from gateway.core.revocation import Revocation


async def test_a_cluster_receives_its_commands_and_its_confirmation_reaches_the_sender(redis_url: str) -> None:
    cluster_id = 900_000 + secrets.randbelow(10_000)  # nobody else listens on it
    gateway, cluster = Bus(redis_url), Bus(redis_url)
    sender, receiver = RedisCommands(gateway), RedisCommands(cluster)
    try:
        assert not await sender.send(cluster_id, b"before")  # nobody listens yet
        async with receiver.inbox(cluster_id) as commands, sender.replies("c1") as replies:
            assert await sender.send(cluster_id, b"remove 3")
            assert await asyncio.wait_for(anext(commands), 5) == b"remove 3"
            await receiver.confirm(replies.key, b"removed 3")
            assert await replies.next(time.monotonic() + 5) == b"removed 3"
    finally:
        await sender.aclose()
        await receiver.aclose()
        await gateway.aclose()
        await cluster.aclose()


async def test_each_kind_of_announcement_goes_out_on_its_own_channel(redis_url: str) -> None:
    redis = Redis.from_url(redis_url)
    pubsub = redis.pubsub()
    try:
        await pubsub.subscribe(keys.MEMBERSHIPS, keys.REVOCATIONS)
        for _ in range(2):
            assert (await pubsub.get_message(timeout=5))["type"] == "subscribe"  # type: ignore[index]
        announcements = RedisAnnouncements(redis)
        await announcements.announce(MembershipsChanged([]))  # no change: nodes of a stack beside this ignore it
        await announcements.announce(Revocation(at=0.0, token_id="nobody's"))
        heard = [await pubsub.get_message(ignore_subscribe_messages=True, timeout=5) for _ in range(2)]
        assert [(m["channel"], m["data"]) for m in heard if m is not None] == [
            (b"gw:memberships", b'{"changes":[]}'),
            (b"gw:revocations", b'{"type":"revoke","at":0.0,"user_id":null,"token_id":"nobody\'s"}'),
        ]
    finally:
        await pubsub.aclose()
        await redis.aclose()


async def test_more_reads_in_flight_than_the_pool_holds_wait_for_a_connection(redis_url: str) -> None:
    """16,000 subscribers connecting at once had more reads in flight than the pool's 100 connections: each
    read past them failed at once (MaxConnectionsError) and its subscriber was told `unavailable`."""
    bus = Bus(redis_url)
    key = f"gw:test:empty:{secrets.token_hex(4)}"
    try:
        # Each read holds its connection for a tenth of a second (a list that stays empty).
        reads = [bus.redis.blpop([key], timeout=0.1) for _ in range(POOL_CONNECTIONS + 50)]
        assert await asyncio.wait_for(asyncio.gather(*reads), 30) == [None] * (POOL_CONNECTIONS + 50)
    finally:
        await bus.aclose()
