"""PostgreSQL's failures as the rest of the gateway names them: nothing outside gateway/store/ names asyncpg's
exception classes.

- `STORE_UNAVAILABLE`: a statement or a connection failed in a way the caller rides out (retries, answers 503,
  logs and goes on): the server out of reach, restarting or timing out, a connection that closed under the
  statement, or the server refusing it.
- `STORE_UNREACHABLE`: a connection could not be made at all (refused, or the server starting or stopping).
- `StatementFailed`: the server ran a statement and refused it (a migration that failed and was rolled back).

They are tuples and classes to use in `except`, not wrappers: translating every call's errors would put a layer
around each of the store's functions for no gain to a caller.
"""

from __future__ import annotations

import asyncpg

__all__ = ["STORE_UNAVAILABLE", "STORE_UNREACHABLE", "StatementFailed"]

STORE_UNAVAILABLE: tuple[type[Exception], ...] = (
    TimeoutError,
    OSError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
)
STORE_UNREACHABLE: tuple[type[Exception], ...] = (OSError, asyncpg.CannotConnectNowError)
StatementFailed = asyncpg.PostgresError
