"""PostgreSQL opened from `DATABASE_URL`: a node's pool, or one connection for a command, the demo's seed or a
reachability check (the relay's own connections: `outbox.py`, `partitions.py`)."""

from __future__ import annotations

import asyncpg

from .types import Connection, Pool


async def connect(database_url: str, timeout: float = 60) -> Connection:
    """One connection; the caller closes it."""
    return await asyncpg.connect(database_url, timeout=timeout)


async def open_pool(database_url: str, min_size: int = 1, max_size: int = 10) -> Pool:
    """A node's pool; the caller closes it."""
    return await asyncpg.create_pool(database_url, min_size=min_size, max_size=max_size)
