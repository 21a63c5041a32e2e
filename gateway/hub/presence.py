"""Who is online: each node marks its users in Redis, with an expiry it keeps renewing.

A user with several tabs, or connections on several nodes, counts once (the relay counts distinct users).
A node that dies stops renewing, so its users drop out within `TTL` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from typing import cast

from redis.asyncio import Redis
from redis.exceptions import RedisError

from ..bus import keys

log = logging.getLogger(__name__)

TTL = 8.0  # a dead node's users drop out within this (plus the relay's one-second tick)
RENEW_EVERY = 2.5


class PresenceBoard:
    def __init__(self, redis: Redis, enabled: bool = True) -> None:
        self.redis = redis
        self.enabled = enabled
        self.node_id = uuid.uuid4().hex[:12]
        self._local: Counter[tuple[int, int]] = Counter()  # (team, user) -> open views on this node

    def _member(self, user_id: int) -> str:
        return f"{user_id}:{self.node_id}"

    async def add(self, team_id: int, user_id: int) -> None:
        if not self.enabled:
            return
        self._local[(team_id, user_id)] += 1
        if self._local[(team_id, user_id)] == 1:
            await self._mark([(team_id, user_id)])

    async def remove(self, team_id: int, user_id: int) -> None:
        if not self.enabled or not self._local[(team_id, user_id)]:
            return
        self._local[(team_id, user_id)] -= 1
        if not self._local[(team_id, user_id)]:
            del self._local[(team_id, user_id)]
            try:
                await self.redis.zrem(keys.presence(team_id), self._member(user_id))
            except (RedisError, OSError):
                pass  # it expires by itself

    async def _mark(self, entries: list[tuple[int, int]]) -> None:
        expires = time.time() + TTL
        async with self.redis.pipeline(transaction=False) as pipe:
            for team_id, user_id in entries:
                pipe.zadd(keys.presence(team_id), {self._member(user_id): expires})
                pipe.sadd(keys.PRESENCE_TEAMS, team_id)
            await pipe.execute()

    async def run(self) -> None:
        """Renew this node's entries until cancelled."""
        while True:
            await asyncio.sleep(RENEW_EVERY)
            if self._local:
                try:
                    await self._mark(list(self._local))
                except (RedisError, OSError) as exc:
                    log.warning("presence not renewed: %s", type(exc).__name__)

    async def clear(self) -> None:
        """A node shutting down takes its users out at once."""
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                for team_id, user_id in self._local:
                    pipe.zrem(keys.presence(team_id), self._member(user_id))
                await pipe.execute()
        except (RedisError, OSError):
            pass
        self._local.clear()


async def online_users(redis: Redis, team_id: int, now: float | None = None) -> set[int]:
    """The team's users online anywhere right now."""
    now = time.time() if now is None else now
    members = cast(list[bytes], await redis.zrangebyscore(keys.presence(team_id), now, "+inf"))
    return {int(keys.text(m).split(":")[0]) for m in members}
