"""Who is online, kept in Redis for every node and the relay: the presence manager.

Each team has a sorted set of `<user>:<node>` entries scored by the time each expires. Nodes join their users
and keep refreshing them; a node that dies stops refreshing, so its entries lapse. The relay looks at the teams
that ever had anyone online, drops what has expired, and counts distinct users (several tabs or nodes count once).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import cast

from redis.asyncio import Redis

from . import keys
from .translate import translated


class PresenceManager:
    """Presence entries of (team, user) pairs, each owned by the node that holds the user's connections."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    @translated
    async def join(self, node_id: str, team_id: int, user_id: int, ttl: float) -> None:
        """Mark a user online in a team from this node, for `ttl` seconds unless refreshed."""
        await self.refresh(node_id, [(team_id, user_id)], ttl)

    @translated
    async def refresh(self, node_id: str, entries: Iterable[tuple[int, int]], ttl: float) -> None:
        """Keep (team, user) entries of this node online for `ttl` more seconds (joining those not yet in)."""
        expires = time.time() + ttl
        async with self.redis.pipeline(transaction=False) as pipe:
            for team_id, user_id in entries:
                pipe.zadd(keys.presence(team_id), {_entry(user_id, node_id): expires})
                pipe.sadd(keys.PRESENCE_TEAMS, team_id)
            await pipe.execute()

    @translated
    async def leave(self, node_id: str, team_id: int, user_id: int) -> None:
        """Take a user of this node out of a team at once (rather than wait for the entry to expire)."""
        await self.redis.zrem(keys.presence(team_id), _entry(user_id, node_id))

    @translated
    async def leave_all(self, node_id: str, entries: Iterable[tuple[int, int]]) -> None:
        """Take several (team, user) entries of this node out at once: a node shutting down."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for team_id, user_id in entries:
                pipe.zrem(keys.presence(team_id), _entry(user_id, node_id))
            await pipe.execute()

    @translated
    async def online(self, team_id: int, now: float | None = None) -> set[int]:
        """The team's users online on any node at `now` (the current time by default)."""
        now = time.time() if now is None else now
        members = cast(list[bytes], await self.redis.zrangebyscore(keys.presence(team_id), now, "+inf"))
        return {int(keys.text(m).split(":")[0]) for m in members}

    @translated
    async def teams(self) -> list[int]:
        """The teams that have had anyone online (the ones worth looking at)."""
        return [int(keys.text(t)) for t in await self.redis.smembers(keys.PRESENCE_TEAMS)]

    @translated
    async def sweep(self, team_ids: list[int], now: float) -> dict[int, set[int]]:
        """Drop the teams' entries that expired by `now` (their nodes stopped refreshing them) and return each
        team's users online, all in one round trip (the relay looks at every team it serves each second)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for team_id in team_ids:
                pipe.zremrangebyscore(keys.presence(team_id), "-inf", now)
                pipe.zrangebyscore(keys.presence(team_id), now, "+inf")
            replies = await pipe.execute()
        return {
            team_id: {int(keys.text(m).split(":")[0]) for m in cast(list[bytes], members)}
            for team_id, members in zip(team_ids, replies[1::2])
        }


def _entry(user_id: int, node_id: str) -> str:
    return f"{user_id}:{node_id}"
