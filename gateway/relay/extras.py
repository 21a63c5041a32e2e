"""The relay's view of the team channel's extras: presence and cluster metrics, published when they change."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..bus.broker import Broker
from ..core.team import ClusterStats, Presence, cluster_stats, same_stats
from ..store.figures import member_counts
from ..store.types import Connection

EVERY = 1.0


class TeamExtras:
    def __init__(
        self,
        broker: Broker,
        presence: bool = True,
        metrics: bool = True,
        mine: Callable[[int], bool] = lambda team_id: True,
    ) -> None:
        self.online = broker.presence
        self.figures = broker.figures
        self.mine = mine  # the teams of this relay's partition
        self.presence = presence  # off on single-user deployments
        self.metrics = metrics  # off in local mode
        self._last_presence: dict[int, Presence] = {}
        self._last_stats: dict[int, ClusterStats] = {}
        self.next_due = 0.0

    async def collect(self, db: Connection, now: float) -> list[tuple[int, Presence | ClusterStats]]:
        """What changed since the last call, per team (the caller publishes it)."""
        self.next_due = now + EVERY
        out: list[tuple[int, Presence | ClusterStats]] = []
        wall = time.time()
        if self.presence:
            teams = sorted(t for t in await self.online.teams() if self.mine(t))
            members = await member_counts(db, teams)
            online = await self.online.sweep(teams, wall) if teams else {}
            for team_id in teams:
                users = sorted(online[team_id])
                presence = Presence(online=len(users), members=members.get(team_id, len(users)), users=users)
                if self._last_presence.get(team_id) != presence:
                    self._last_presence[team_id] = presence
                    out.append((team_id, presence))
        if self.metrics:
            reporting = [t for t in await self.figures.teams() if self.mine(t)]
            figures = await self.figures.read(reporting) if reporting else {}
            for team_id in reporting:
                stats = cluster_stats(figures[team_id], wall)
                if not same_stats(self._last_stats.get(team_id), stats):
                    self._last_stats[team_id] = stats
                    out.append((team_id, stats))
        return out
