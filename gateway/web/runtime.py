"""What a running web process holds: settings, the PostgreSQL pool, Redis, and the node's hub."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import asyncpg
from ..bus.connection import Bus
from ..config import Settings
from ..core.ratelimit import TokenBucket
from ..hub.node import Node


@dataclass
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    bus: Bus
    node: Node
    admission: TokenBucket | None = None

    @property
    def redis(self) -> Any:
        """Redis for single-key commands (routed by slot in a cluster)."""
        return self.bus.redis

    def origin_allowed(self, origin: str, host: str) -> bool:
        """Same origin, or one listed in GATEWAY_ORIGINS."""
        origin = origin.rstrip("/")
        allowed = self.settings.origins
        if origin in allowed or "*" in allowed:
            return True
        return bool(host) and urlsplit(origin).netloc == host
