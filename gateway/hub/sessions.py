"""A node's share of the account page's "last seen": every request and handshake of a session is noted in
memory (gateway.core.sessions), and every few seconds what is due goes to PostgreSQL in one or two statements,
with the sessions of the node's open sockets, which make no requests but are in use all the same.

"Last seen" is a convenience, not a security fact (revocations are), so a failed write is only logged: the
sessions are written when next seen.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..core.device import device_of
from ..core.sessions import Seen, SeenSessions
from ..credentials import Claims
from ..store import sessions as stored
from ..store.errors import STORE_UNAVAILABLE
from ..store.types import Pool
from .connection import Connection

log = logging.getLogger(__name__)

WRITE_EVERY = 5.0  # seconds between writes: a new session is listed within this
PRUNE_EVERY = 60.0  # seconds between deletions of long expired sessions
_ERRORS = STORE_UNAVAILABLE


class SessionsSeen:
    def __init__(self, pool: Pool, connections: set[Connection]) -> None:
        self.pool = pool
        self.connections = connections  # the node's live ones
        self.core = SeenSessions()
        self._task: asyncio.Task[None] | None = None
        self._pruned = 0.0

    def seen(self, found: Claims, user_agent: str) -> None:
        """A request or a handshake made with this session (its token checked)."""
        now = time.time()
        if self.core.wants(found.token_id, now):
            seen = Seen(found.token_id, found.user_id, found.started, found.expires, device_of(user_agent))
            self.core.seen(seen, now)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="sessions-seen")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def write(self) -> None:
        """Write what is due now."""
        now = time.time()
        self.core.still_live({c.token_id for c in self.connections if c.close_code is None}, now)
        due = self.core.take(now)
        prune = now - self._pruned >= PRUNE_EVERY
        if not (due.seen or due.live or prune):
            return
        try:
            async with self.pool.acquire() as db:
                await stored.record(db, due.seen)
                await stored.touch(db, due.live)
                if prune:
                    await stored.prune(db)
                    self._pruned = now
        except (Exception, asyncio.CancelledError):
            self.core.failed(due)
            raise

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(WRITE_EVERY)
            try:
                await asyncio.wait_for(self.write(), WRITE_EVERY)
            except _ERRORS as exc:
                log.warning("writing sessions' last seen failed: %s", type(exc).__name__)
            except Exception:  # the loop must not die with an unexpected error
                log.exception("writing sessions' last seen failed")
