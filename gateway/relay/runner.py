"""Run the relay: hold the partition's lock, tail the outbox, publish each cycle's batches.

One relay is active; standbys wait on the advisory lock. The lock lives on a dedicated direct connection
(a pool would release it on reset). Every takeover takes a new epoch, so nodes can drop what an older
relay still publishes.
"""

from __future__ import annotations

import asyncio
import logging
import time

import asyncpg
from redis.asyncio import Redis

from ..bus.publisher import Publisher
from ..core.relay import RelayCore, batch_delay
from ..store.outbox import OutboxReader

log = logging.getLogger(__name__)

LOCK_KEY = 0x72656C6179  # "relay": partition 0
IDLE_POLL = 0.5  # asleep, the fallback when a wake-up is missed
BUSY_POLL = 0.005  # awake, between polls that found nothing
LINGER = 0.2  # stay awake this long after the last change before sleeping
HELD_BACK_LOG_AFTER = 2.0


class Relay:
    def __init__(self, database_url: str, redis_url: str) -> None:
        self.database_url = database_url
        self.redis_url = redis_url
        self.core: RelayCore | None = None
        self.ready = asyncio.Event()  # set once the first cycle has published
        self._wake = asyncio.Event()
        self.published = 0

    async def run(self) -> None:
        lock_conn = await asyncpg.connect(self.database_url, server_settings={"application_name": "gateway-relay-lock"})
        try:
            await self._acquire(lock_conn)
            epoch = await lock_conn.fetchval("select nextval('relay_epochs')")
            log.info("relay active, epoch %d", epoch)
            await self._serve(lock_conn, epoch)
        finally:
            await lock_conn.close()

    async def _acquire(self, lock_conn: asyncpg.Connection) -> None:
        waiting = False
        while not await lock_conn.fetchval("select pg_try_advisory_lock($1)", LOCK_KEY):
            if not waiting:
                log.info("another relay is active; standing by")
                waiting = True
            await asyncio.sleep(1.0)

    async def _serve(self, lock_conn: asyncpg.Connection, epoch: int) -> None:
        conn = await asyncpg.connect(self.database_url, server_settings={"application_name": "gateway-relay"})
        redis = Redis.from_url(self.redis_url)
        try:
            await conn.add_listener("job_changes", lambda *_: self._wake.set())
            reader = OutboxReader(conn)
            core = self.core = RelayCore(epoch)
            core.load(await reader.load())
            await self._loop(lock_conn, conn, reader, core, Publisher(redis))
        finally:
            await redis.aclose()
            await conn.close()

    async def _loop(
        self,
        lock_conn: asyncpg.Connection,
        conn: asyncpg.Connection,
        reader: OutboxReader,
        core: RelayCore,
        publisher: Publisher,
    ) -> None:
        held_since: float | None = None
        last_held_log = 0.0
        last_change = time.monotonic()
        await conn.execute("update relay_wakeup set sleeping = false")
        while True:
            result = await reader.read()
            if result.changes:
                unknown = core.unknown_trajectories(result.changes)
                if unknown:
                    for row in await conn.fetch(
                        "select id, team_id, name from trajectories where id = any($1::bigint[])", list(unknown)
                    ):
                        core.add_trajectory(row["id"], row["team_id"], row["name"])
                core.apply(result.changes)
            missing = core.channels_without_seq()
            if missing:
                core.set_seqs(await publisher.last_seqs(missing))
            now = time.monotonic()
            publications = core.take_job_publications() + core.take_team_publications(now)
            if publications:
                if lock_conn.is_closed():
                    raise ConnectionError("relay lost its lock connection; not publishing")
                await publisher.publish(publications)
                self.published += len(publications)
            self.ready.set()

            if result.held_back:
                held_since = held_since or now
                if now - held_since > HELD_BACK_LOG_AFTER and now - last_held_log > 10.0:
                    last_held_log = now
                    blocker = await reader.blocker(result.horizon)
                    if blocker is not None:
                        log.warning(
                            "relay held back %.1fs by open transaction xid=%d pid=%d (%s, open %.1fs): %s",
                            now - held_since, blocker.xid, blocker.pid, blocker.state, blocker.age_seconds, blocker.query,
                        )
            else:
                held_since = None

            if result.full:
                continue
            if result.changes or result.held_back:
                last_change = now
            delay = batch_delay(len(result.changes))
            if result.held_back and held_since is not None:
                # Back off while an open transaction holds the horizon: it may stay open for long.
                delay = max(delay, min(0.1, BUSY_POLL + (now - held_since) / 10))
            if delay:
                await asyncio.sleep(delay)
            if result.changes or result.held_back:
                continue
            due = core.next_team_due()
            if now - last_change < LINGER:
                # Awake: poll again soon. Writers are not asked to NOTIFY meanwhile (it serialises commits).
                wait = BUSY_POLL if due is None else min(BUSY_POLL, max(0.0, due - time.monotonic()))
                await asyncio.sleep(wait)
                continue
            await self._sleep(conn, reader, due)

    async def _sleep(self, conn: asyncpg.Connection, reader: OutboxReader, due: float | None) -> None:
        """Ask writers to wake us, look once more (a commit may have slipped in), then wait."""
        self._wake.clear()
        await conn.execute("update relay_wakeup set sleeping = true")
        try:
            if not (await reader.peek()):
                timeout = IDLE_POLL if due is None else max(0.0, due - time.monotonic())
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout)
                except asyncio.TimeoutError:
                    pass
        finally:
            await conn.execute("update relay_wakeup set sleeping = false")
