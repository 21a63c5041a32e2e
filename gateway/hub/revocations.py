"""A node's revoked sessions: loaded from PostgreSQL at start, kept current by the bus's announcements
(gateway.bus.announcements, the path membership removals take to every node), reloaded now and then in case
Redis dropped one.

Every handshake and HTTP request checks its token against the set in memory; a revocation that arrives ends
the live websockets of the sessions it names with 4001, as an expired token would (the browser's renewal is
then refused, and it signs in again).
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..bus.broker import Announcements
from ..bus.errors import BusError
from ..core.revocation import Revocation, Revocations
from ..store import revocations as stored
from ..store.errors import STORE_UNAVAILABLE
from ..store.types import Pool
from .connection import CLOSE_EXPIRED, Connection

log = logging.getLogger(__name__)

RELOAD_EVERY = 10.0  # seconds: the safety net for a broadcast this node missed


class SessionRevocations:
    def __init__(self, pool: Pool, connections: set[Connection], max_age: float) -> None:
        self.pool = pool
        self.connections = connections  # the node's live ones
        self.max_age = max_age
        self.known = Revocations()
        self._task: asyncio.Task[None] | None = None

    def revoked(self, user_id: int, token_id: str, started: float) -> bool:
        return self.known.revoked(user_id, token_id, started)

    async def start(self) -> None:
        await self.load()
        self._task = asyncio.create_task(self._reload(), name="revocations")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def load(self) -> None:
        for revocation in self.known.merge(await stored.load(self.pool, self.max_age), time.time() - self.max_age):
            self._end_sessions(revocation)

    async def _reload(self) -> None:
        while True:
            await asyncio.sleep(RELOAD_EVERY)
            try:
                await asyncio.wait_for(self.load(), RELOAD_EVERY)
            except STORE_UNAVAILABLE as exc:
                log.warning("reloading revocations failed: %s", type(exc).__name__)
            except Exception:  # the safety net must not die with an unexpected error
                log.exception("reloading revocations failed")

    def apply(self, revocation: Revocation) -> None:
        """A revocation recorded here, or announced on the bus (by `gateway revoke` or another node)."""
        if self.known.add(revocation):
            self._end_sessions(revocation)

    def _end_sessions(self, revocation: Revocation) -> None:
        ended = [
            conn
            for conn in self.connections
            if conn.user_id == revocation.user_id
            or (revocation.token_id is not None and conn.token_id == revocation.token_id)
        ]
        for conn in ended:
            conn.close(CLOSE_EXPIRED)
        if ended:
            log.info("revoked: closed %d connection(s) of %s", len(ended), _named(revocation))


async def revoke(
    db: stored.Database,
    announcements: Announcements | None,
    max_age: float,
    user_id: int | None = None,
    token_id: str | None = None,
) -> Revocation:
    """Record a revocation, then announce it to every node (None: no Redis here); when no announcement reaches
    them, their reload finds it."""
    revocation = await stored.record(db, max_age, user_id=user_id, token_id=token_id)
    if announcements is None:
        return revocation
    try:
        await announcements.announce(revocation)
    except BusError as exc:
        log.warning("revocation stored but not broadcast (%s): nodes find it within %.0f s", exc, RELOAD_EVERY)
    return revocation


def _named(revocation: Revocation) -> str:
    return f"user {revocation.user_id}" if revocation.user_id is not None else f"token {revocation.token_id}"
