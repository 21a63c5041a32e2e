"""The relay's housekeeping (gateway.relay.maintenance, gateway.store.maintenance) against a real PostgreSQL:
outbox rows go once published and past the retention, and only the partition's own; jobs past their retention
leave the lists through the captured path, their tombstones later."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from gateway.relay.maintenance import Housekeeping
from gateway.store import maintenance
from gateway.store.outbox import OutboxReader, ReadResult
from tests.unit.outbox_reads import read_all


@pytest.fixture
async def db(url: str) -> AsyncIterator[asyncpg.Connection]:
    db = await asyncpg.connect(url)
    yield db
    await db.close()


async def insert_jobs(db: asyncpg.Connection, team_id: int, n: int) -> list[int]:
    cluster_id = await db.fetchval("insert into clusters (team_id, name) values ($1, 'gpu-1') returning id", team_id)
    trajectory_id = await db.fetchval(
        "insert into trajectories (team_id, name) values ($1, 'trajectory') returning id", team_id
    )
    rows = await db.fetch(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame)"
        " select $1, $2, $3, 'preprocess', 'Preprocess trajectory frame', f from generate_series(0, $4 - 1) f"
        " returning id",
        team_id,
        trajectory_id,
        cluster_id,
        n,
    )
    return [r["id"] for r in rows]


async def teams_in_each_partition(db: asyncpg.Connection) -> tuple[int, int]:
    """A team of partition 0 and one of partition 1 (of 2)."""
    ids: dict[int, int] = {}
    while len(ids) < 2:
        team_id = await db.fetchval("insert into teams (name) values ($1) returning id", secrets.token_hex(3))
        ids.setdefault(team_id % 2, team_id)
    return ids[0], ids[1]


async def outbox_rows(db: asyncpg.Connection, team_id: int) -> int:
    count: int = await db.fetchval("select count(*) from job_changes where team_id = $1 and entity = 'job'", team_id)
    return count


async def test_published_outbox_rows_of_the_partition_are_deleted_past_the_retention(
    url: str, db: asyncpg.Connection
) -> None:
    mine, other = await teams_in_each_partition(db)
    reader_db = await asyncpg.connect(url)
    try:
        reader = OutboxReader(reader_db, partition=0, count=2)
        await reader.load()
        await insert_jobs(db, other, 3)  # below the cursor too: only the partition tells them apart
        await insert_jobs(db, mine, 3)
        housekeeping = Housekeeping(reader, retention=1.0, job_retention=3600.0)
        result = await read_all(reader)
        assert result.changes
        idle = ReadResult([], result.horizon, held_back=False, full=False)  # cycles that read nothing
        start = time.monotonic()
        await housekeeping.after_cycle(result, start)  # published now: kept for the retention
        await insert_jobs(db, mine, 2)  # captured, not yet read: not published
        await housekeeping.after_cycle(idle, start + 0.6)
        assert await outbox_rows(db, mine) == 5  # pruning is due, the rows are not
        await housekeeping.after_cycle(idle, start + 1.2)
        assert await outbox_rows(db, mine) == 2  # the rows read past the cursor stay
        assert await outbox_rows(db, other) == 3  # another partition's relay prunes its own
    finally:
        await reader_db.close()


async def test_jobs_past_retention_leave_the_lists_through_the_outbox_and_their_tombstones_go_later(
    db: asyncpg.Connection,
) -> None:
    team_id, _ = await teams_in_each_partition(db)
    ids = await insert_jobs(db, team_id, 3)
    await asyncio.sleep(0.5)
    await maintenance.sweep_jobs(db, job_retention=0.2)
    removed = await db.fetch("select id from jobs where id = any($1::bigint[]) and removed_at is not null", ids)
    assert sorted(r["id"] for r in removed) == ids
    unlisted = await db.fetch(
        "select job_id from job_changes where job_id = any($1::bigint[]) and old_status = 'queued'"
        " and new_status is null",
        ids,
    )
    assert sorted(r["job_id"] for r in unlisted) == ids  # the relays count them out
    await asyncio.sleep(1.6)  # seven times the retention
    await maintenance.sweep_jobs(db, job_retention=0.2)
    assert await db.fetchval("select count(*) from jobs where id = any($1::bigint[])", ids) == 0
