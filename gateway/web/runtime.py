"""What a running web process holds: settings, the PostgreSQL pool, Redis, and the node's hub."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg
from redis.asyncio import Redis

from ..config import Settings
from ..hub.node import Node


@dataclass
class Runtime:
    settings: Settings
    pool: asyncpg.Pool
    redis: Redis
    node: Node
    connections: int = 0
