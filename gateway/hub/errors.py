"""The failures a node rides out (PostgreSQL or Redis away or restarting): a request fails, the node goes on."""

from __future__ import annotations

import asyncio

import asyncpg
from redis.exceptions import RedisError

TRANSIENT = (asyncio.TimeoutError, OSError, asyncpg.PostgresError, ConnectionError, RedisError)
RETRY_AFTER = 0.2  # seconds before a failed read is tried once more, on a fresh connection
