"""What a running web process holds: settings, the PostgreSQL pool, Redis, and the node's hub."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

import asyncpg
from redis.asyncio import Redis

from ..config import Settings
from ..core.ratelimit import TokenBucket
from ..hub.node import Node


@dataclass
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    redis: Redis
    node: Node
    admission: TokenBucket | None = None

    def origin_allowed(self, origin: str, host: str) -> bool:
        """Same origin, or one listed in GATEWAY_ORIGINS."""
        origin = origin.rstrip("/")
        allowed = self.settings.origins
        if origin in allowed or "*" in allowed:
            return True
        return bool(host) and urlsplit(origin).netloc == host
