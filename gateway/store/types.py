"""Types the store's functions share."""

from __future__ import annotations

from typing import TypeAlias

import asyncpg

# What a query runs on: the pool (one statement, any connection), or one connection (a transaction, a session).
Database: TypeAlias = asyncpg.Pool | asyncpg.Connection
# What the rest of the gateway holds, by the store's names: nothing outside gateway/store/ imports asyncpg.
Pool: TypeAlias = asyncpg.Pool
Connection: TypeAlias = asyncpg.Connection
