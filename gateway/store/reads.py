"""A person's reads: each in a short read-only transaction of its own, every statement in it bounded by the
statement timeout (GATEWAY_STATEMENT_TIMEOUT). The transaction ends before the answer goes out, so nothing here
waits on a client while it holds a pooled connection.

The relay, ingest and migrations have no such bound: their statements are the gateway's own, not a person's.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

import asyncpg


class TooSlow(Exception):
    """A statement of a person's read ran past the statement timeout; the server cancelled it."""


@asynccontextmanager
async def bounded(
    pool: asyncpg.Pool, timeout: float, isolation: Literal["read_committed", "repeatable_read"] = "read_committed"
) -> AsyncIterator[asyncpg.Connection]:
    """A connection in a read-only transaction whose statements may each run `timeout` seconds (0: no bound);
    TooSlow when one runs longer."""
    async with pool.acquire() as db:
        try:
            async with db.transaction(isolation=isolation, readonly=True):
                if timeout > 0:  # `set_config(..., true)`: for this transaction only, the pooled connection unchanged
                    await db.execute(
                        "select set_config('statement_timeout', $1, true)", f"{math.ceil(timeout * 1000)}ms"
                    )
                yield db
        except asyncpg.QueryCanceledError:
            raise TooSlow(f"a statement ran past {timeout:g} s") from None
