"""What a running web process holds: settings, the PostgreSQL pool, the broker, and the node's hub."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import asyncpg

from ..bus.broker import Broker
from ..bus.commands import ClusterCommands
from ..config import Settings
from ..core.ratelimit import KeyedRate, TokenBucket
from ..hub.node import Node
from ..hub.revocations import SessionRevocations
from ..hub.sessions import SessionsSeen
from .heard import Hearing

if TYPE_CHECKING:
    from .inflight import ActionLimits  # it raises guards' errors, and guards reads the runtime
    from .quotas import Creations  # the same


@dataclass
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    broker: Broker
    node: Node
    commands: ClusterCommands
    actions: ActionLimits
    admission: TokenBucket | None = None
    revocations: SessionRevocations | None = None  # every session's token is checked against it
    http_rate: KeyedRate | None = None  # per user and per cluster (GATEWAY_HTTP_RATE)
    sessions: SessionsSeen | None = None  # where each session was last seen (the account page)
    hearing: Hearing | None = None  # notes when each cluster was last heard from
    creations: Creations | None = None  # rows each team's clusters may create an hour (made from the settings)

    def __post_init__(self) -> None:
        if self.creations is None:
            from .quotas import Creations  # here: it imports guards, which imports this module

            self.creations = Creations(self.settings.max_new_jobs_per_hour, self.settings.max_new_trajectories_per_hour)

    def origin_allowed(self, origin: str, host: str) -> bool:
        """Same origin, or one listed in GATEWAY_ORIGINS."""
        origin = origin.rstrip("/")
        allowed = self.settings.origins
        if origin in allowed or "*" in allowed:
            return True
        return bool(host) and urlsplit(origin).netloc == host
