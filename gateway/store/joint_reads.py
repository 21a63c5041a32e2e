"""The outbox reads of one relay process's busy partitions, made as one statement.

While its changes come fast, each partition's relay reads the outbox every few milliseconds (gateway.relay.pacing),
and a read's fixed cost in PostgreSQL (a snapshot, an index descent, a round trip) is paid per statement: P
partitions reading apart would make P statements for the changes one partition's relay reads in one. So busy
partitions wake on a shared grid, and the reads that arrive within GATHER of the first go to PostgreSQL as one
statement: one index range per partition (the partitions and their cursors given as arrays, so that one
statement, planned once, serves every set of partitions), under one horizon; each reader then takes its own
rows, as if it had read alone.

A reader that must read alone (one just taken over reads under the snapshot its state was loaded from) does. A
failed statement fails every read that was in it, as its own read's failure would have.
"""

from __future__ import annotations

import asyncio

import asyncpg

from .outbox import HORIZON, READ_PARTITION, OutboxReader, ReadResult, connect, partition_filter

GATHER = 0.002  # how long the first read waits for the others of its tick (wake-ups land within a millisecond)


def joint_statement(count: int) -> str:
    """One statement reading any of the `count` partitions past their cursors (parameters: arrays of the
    partitions, their cursors' xid and seq, their limits), rows ordered by partition, then in each partition's
    commit-safe order. One text for every set of partitions, planned once per connection (`JointReads` asks
    PostgreSQL for its generic plan)."""
    partition_filter(0, count)  # checks `count` is a number: it is written into the SQL
    return (
        HORIZON
        + READ_PARTITION.format(
            part="p.part",
            partitions=", unnest($1::int[], $2::bigint[], $3::bigint[], $4::int[]) as p(part, xid, seq, lim)",
            count=count,
            counted="false",
            xid="p.xid",
            seq="p.seq",
            limit="p.lim",
        )
        + "order by part, xid, seq"
    )


class JointReads:
    def __init__(self, database_url: str, count: int) -> None:
        self.database_url = database_url
        self.count = count
        self.statements = 0  # joint statements that ran (what the benchmark and the tests count)
        self.answered = 0  # the partitions' reads they answered
        self._db: asyncpg.Connection | None = None
        self._waiting: dict[int, tuple[OutboxReader, int, asyncio.Future[ReadResult]]] = {}
        self._gather: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._sql = joint_statement(count)
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
            readers = [batch[p][0] for p in partitions]
            limits = [batch[p][1] for p in partitions]
            rows = await self._fetch(list(partitions), [r.xid for r in readers], [r.seq for r in readers], limits)
            by_partition: dict[int, list[asyncpg.Record]] = {p: [] for p in partitions}
            for row in rows:
                by_partition[row["part"]].append(row)
            self.statements += 1
            self.answered += len(partitions)
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

    def warm(self) -> None:
        """In the background, open the connection and run the statement once on no partitions, before the first
        busy moment: its start, asyncpg's look-up of the array types and the generic plan cost about 10 ms, which
        the first joint read would otherwise add to its cycle in the middle of traffic."""
        task = asyncio.get_running_loop().create_task(self._warm())
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _warm(self) -> None:
        try:
            await self._fetch([], [], [], [])
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            pass  # left to the first read, which opens a connection again

    async def _fetch(self, *params: list[int]) -> list[asyncpg.Record]:
        async with self._one_at_a_time:
            if self._db is None or self._db.is_closed():
                # Planned once: PostgreSQL's default would plan the statement anew at every read (its parameters
                # are arrays, whose generic estimate never looks cheaper), twice what running it costs.
                self._db = await connect(self.database_url, generic_plans=True)
            try:
                return await self._db.fetch(self._sql, *params)
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
