"""gateway.bus.presence against a real Redis: nodes join, refresh and leave; the relay expires and counts."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from gateway.bus import keys
from gateway.bus.presence import PresenceManager
from gateway.hub.presence import PresenceBoard

TEAM = 900_001  # no real team: a stack running beside these tests never sees it (another database, too)


@pytest.fixture
def redis(scratch_redis: Redis) -> Redis:
    return scratch_redis


async def test_a_user_on_two_nodes_counts_once_and_stays_until_both_leave(redis: Redis) -> None:
    presence = PresenceManager(redis)
    await presence.join("node-a", TEAM, 7, ttl=30)
    await presence.join("node-b", TEAM, 7, ttl=30)
    await presence.join("node-b", TEAM, 8, ttl=30)
    assert await presence.online(TEAM) == {7, 8}
    assert TEAM in await presence.teams()
    await presence.leave("node-a", TEAM, 7)
    assert await presence.online(TEAM) == {7, 8}
    await presence.leave_all("node-b", [(TEAM, 7), (TEAM, 8)])
    assert await presence.online(TEAM) == set()


async def test_an_entry_nobody_refreshes_lapses_and_a_sweep_drops_it(redis: Redis) -> None:
    presence = PresenceManager(redis)
    await presence.join("node-a", TEAM, 7, ttl=5)
    await presence.refresh("node-a", [(TEAM, 8)], ttl=60)
    await presence.join("node-b", TEAM + 1, 9, ttl=60)
    later = time.time() + 10
    assert await presence.online(TEAM, later) == {8}
    assert await redis.zcard(keys.presence(TEAM)) == 2
    assert await presence.sweep([TEAM, TEAM + 1, TEAM + 2], later) == {TEAM: {8}, TEAM + 1: {9}, TEAM + 2: set()}
    assert await redis.zcard(keys.presence(TEAM)) == 1
    assert await presence.online(TEAM) == {8}


class LateLeave(PresenceManager):
    """The real presence on the real Redis, with a user's leave landing only after their next join has: what two
    pooled connections may do with a tab that closes and opens again at once."""

    def __init__(self, redis: Redis) -> None:
        super().__init__(redis)
        self.joined = asyncio.Event()
        self.late = True  # the first leave only

    async def join(self, node_id: str, team_id: int, user_id: int, ttl: float) -> None:
        await super().join(node_id, team_id, user_id, ttl)
        self.joined.set()

    async def leave(self, node_id: str, team_id: int, user_id: int) -> None:
        if self.late:
            self.late = False
            self.joined.clear()
            await asyncio.wait_for(self.joined.wait(), 30)
        await super().leave(node_id, team_id, user_id)


async def test_a_user_who_leaves_and_comes_back_at_once_stays_online_whatever_order_redis_takes_it_in(
    redis: Redis,
) -> None:
    presence = LateLeave(redis)
    board = PresenceBoard(presence)
    await board.add(TEAM, 7)
    leaving = asyncio.create_task(board.remove(TEAM, 7))  # its ZREM waits for the join after it
    await asyncio.sleep(0)
    await board.add(TEAM, 7)
    await asyncio.wait_for(leaving, 30)
    assert await presence.online(TEAM) == {7}  # not "nobody online" until the next renewal
    await board.remove(TEAM, 7)
    assert await presence.online(TEAM) == set()
