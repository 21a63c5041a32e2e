"""The outbox reads of one relay process's busy partitions, made as one statement.

While its changes come fast, each partition's relay reads the outbox every few milliseconds (gateway.relay.pacing),
and a read's fixed cost in PostgreSQL (a snapshot, an index descent, a round trip) is paid per statement: P
partitions reading apart would make P statements for the changes one partition's relay reads in one. So busy
partitions wake on a shared grid, and the reads that arrive within GATHER of the first go to PostgreSQL as one
statement: one index range per partition (each one's filter written in, so that the planner keeps using the
partition index), under one horizon; each reader then takes its own rows, as if it had read alone.

A reader that must read alone (one just taken over reads under the snapshot its state was loaded from) does. A
failed statement fails every read that was in it, as its own read's failure would have.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from .outbox import OutboxReader, ReadResult, connect, partition_filter

log = logging.getLogger(__name__)

GATHER = 0.002  # how long the first read waits for the others of its tick (wake-ups land within a millisecond)

_WITH = "with h as (select pg_snapshot_xmin(pg_current_snapshot())::text::bigint as horizon)\n"
_BRANCH = """
select {partition} as part, h.horizon, c.xid, c.seq, c.entity, c.old_status, c.new_status, c.job::text as job,
       false as counted,
       (c.seq is null and exists (select 1 from job_changes b where {mine} and b.xid >= h.horizon)) as held_back
from h left join lateral (
    select xid, seq, entity, old_status, new_status, job from job_changes
    where {mine} and (xid, seq) > (${xid}::bigint, ${seq}::bigint) and xid < h.horizon
    order by xid, seq
    limit ${limit}
) c on true
"""


def joint_statement(partitions: tuple[int, ...], count: int) -> str:
    """One statement reading the given partitions past their cursors (parameters: xid, seq, limit of each, in
    order), rows ordered by partition, then in each partition's commit-safe order."""
    branches = [
        _BRANCH.format(partition=p, mine=partition_filter(p, count), xid=3 * i + 1, seq=3 * i + 2, limit=3 * i + 3)
        for i, p in enumerate(partitions)
    ]
    return _WITH + "union all".join(branches) + "order by part, xid, seq"


class JointReads:
    def __init__(self, database_url: str, count: int) -> None:
        self.database_url = database_url
        self.count = count
        self.statements = 0  # joint statements that ran (what the benchmark and the tests count)
        self._db: asyncpg.Connection | None = None
        self._waiting: dict[int, tuple[OutboxReader, int, asyncio.Future[ReadResult]]] = {}
        self._gather: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._sql: dict[tuple[int, ...], str] = {}
        self._one_at_a_time = asyncio.Lock()  # one connection: a batch gathered meanwhile waits for the last one

    async def read(self, reader: OutboxReader, limit: int = 5000) -> ReadResult:
        if reader.alone or reader.partition in self._waiting:
            return await reader.read(limit)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ReadResult] = loop.create_future()
        self._waiting[reader.partition] = (reader, limit, future)
        if self._gather is None:
            self._gather = loop.call_later(GATHER, self._start)
        return await future

    def _start(self) -> None:
        self._gather = None
        batch, self._waiting = self._waiting, {}
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, batch: dict[int, tuple[OutboxReader, int, asyncio.Future[ReadResult]]]) -> None:
        partitions = tuple(sorted(batch))
        try:
            rows = await self._fetch(partitions, [v for p in partitions for v in self._params(batch[p])])
            by_partition: dict[int, list[asyncpg.Record]] = {p: [] for p in partitions}
            for row in rows:
                by_partition[row["part"]].append(row)
            self.statements += 1
            for partition in partitions:
                reader, limit, future = batch[partition]
                if not future.done():  # its relay may have stopped meanwhile
                    future.set_result(reader.take(by_partition[partition], limit))
        except Exception as exc:
            for _, _, future in batch.values():
                if not future.done():
                    future.set_exception(exc)
        finally:
            for _, _, future in batch.values():
                future.cancel()  # only those still undone: the task itself was cancelled

    @staticmethod
    def _params(waiting: tuple[OutboxReader, int, asyncio.Future[ReadResult]]) -> tuple[int, int, int]:
        reader, limit, _ = waiting
        return reader.xid, reader.seq, limit

    async def _fetch(self, partitions: tuple[int, ...], params: list[int]) -> list[asyncpg.Record]:
        sql = self._sql.get(partitions)
        if sql is None:
            sql = self._sql[partitions] = joint_statement(partitions, self.count)
        async with self._one_at_a_time:
            if self._db is None or self._db.is_closed():
                self._db = await connect(self.database_url)
            try:
                return await self._db.fetch(sql, *params)
            except Exception:
                # A connection that failed once may be in any state (asyncpg can find one the server ended
                # mid-way through its next statement): the next statement gets a fresh one.
                self._db.terminate()
                self._db = None
                raise

    async def close(self) -> None:
        if self._gather is not None:
            self._gather.cancel()
            self._gather = None
        for _, _, future in self._waiting.values():
            future.cancel()
        self._waiting = {}
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        if self._db is not None:
            await self._db.close()
            self._db = None
