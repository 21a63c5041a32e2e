"""The relay's view of the team channel's extras: presence and cluster metrics, published when they change."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import cast

import asyncpg
import msgspec
from redis.asyncio import Redis

from ..bus import keys
from ..core.team import ClusterFigures, ClusterStats, Presence, cluster_stats, same_stats
from ..hub.presence import online_users

EVERY = 1.0
_figures = msgspec.msgpack.Decoder(ClusterFigures)


class TeamExtras:
    def __init__(
        self,
        redis: Redis,
        presence: bool = True,
        metrics: bool = True,
        mine: Callable[[int], bool] = lambda team_id: True,
    ) -> None:
        self.redis = redis
        self.mine = mine  # the teams of this relay's partition
        self.presence = presence  # off on single-user deployments
        self.metrics = metrics  # off in local mode
        self._last_presence: dict[int, Presence] = {}
        self._last_stats: dict[int, ClusterStats] = {}
        self.next_due = 0.0

    async def collect(self, conn: asyncpg.Connection, now: float) -> list[tuple[int, Presence | ClusterStats]]:
        """What changed since the last call, per team (the caller publishes it)."""
        self.next_due = now + EVERY
        out: list[tuple[int, Presence | ClusterStats]] = []
        wall = time.time()
        if self.presence:
            teams = sorted(
                t for t in map(int, map(keys.text, await self.redis.smembers(keys.PRESENCE_TEAMS))) if self.mine(t)
            )
            rows = await conn.fetch(
                "select team_id, count(*) as n from memberships where team_id = any($1::bigint[]) group by team_id",
                teams,
            )
            members = {r["team_id"]: r["n"] for r in rows}
            for team_id in teams:
                await self.redis.zremrangebyscore(keys.presence(team_id), "-inf", wall)
                users = sorted(await online_users(self.redis, team_id, wall))
                presence = Presence(online=len(users), members=members.get(team_id, len(users)), users=users)
                if self._last_presence.get(team_id) != presence:
                    self._last_presence[team_id] = presence
                    out.append((team_id, presence))
        if self.metrics:
            for raw in await self.redis.smembers(keys.METRICS_TEAMS):
                team_id = int(keys.text(raw))
                if not self.mine(team_id):
                    continue
                reports = cast(dict[bytes, bytes], await self.redis.hgetall(keys.metrics(team_id)))
                stats = cluster_stats([_figures.decode(v) for v in reports.values()], wall)
                if not same_stats(self._last_stats.get(team_id), stats):
                    self._last_stats[team_id] = stats
                    out.append((team_id, stats))
        return out
