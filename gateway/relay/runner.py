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
IDLE_POLL = 1.0  # the fallback when a NOTIFY is missed
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
        while True:
            self._wake.clear()
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
            delay = batch_delay(len(result.changes))
            if result.held_back:
                delay = max(delay, 0.005)
            if delay:
                await asyncio.sleep(delay)
            if result.held_back or self._wake.is_set():
                continue
            due = core.next_team_due()
            timeout = IDLE_POLL if due is None else max(0.0, due - time.monotonic())
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
