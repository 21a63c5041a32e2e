"""Each relay reads only its partition's outbox rows, through an index of their own (gateway.store.outbox),
against a real PostgreSQL: with P partitions the reads do not multiply by P."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import pytest

from gateway.core.aggregate import Change
from gateway.store import outbox
from gateway.store.outbox import OutboxReader, partition_filter
from tests.unit.outbox_reads import read_all
from tests.unit.test_relay_maintenance import insert_jobs


@pytest.fixture
async def db(url: str) -> AsyncIterator[asyncpg.Connection]:
    db = await asyncpg.connect(url)
    yield db
    await db.close()


async def indexes(db: asyncpg.Connection) -> dict[str, bool]:
    rows = await db.fetch(
        "select c.relname, i.indisvalid from pg_index i join pg_class c on c.oid = i.indexrelid"
        " where i.indrelid = 'job_changes'::regclass and c.relname like 'job_changes_team_mod_%'"
    )
    return {r["relname"]: r["indisvalid"] for r in rows}


def scanned_indexes(plan: object) -> set[str]:
    """Every index a (JSON) plan scans."""
    found: set[str] = set()
    if isinstance(plan, dict):
        if "Index Name" in plan:
            found.add(plan["Index Name"])
        for value in plan.values():
            found |= scanned_indexes(value)
    elif isinstance(plan, list):
        for value in plan:
            found |= scanned_indexes(value)
    return found


async def test_each_of_four_relays_reads_its_own_teams_rows_through_the_partition_index(
    url: str, db: asyncpg.Connection
) -> None:
    await outbox.partition_index(db, 4)
    assert await indexes(db) == {"job_changes_team_mod_4": True}
    # An outbox of some size, as a relay finds it (rows of 40 other teams, committed before the relays start). A
    # reader may still read some of them: it starts at its snapshot's xmin, which a transaction in another database
    # of the same server holds back, so they are whole jobs and the counts below are of the test's own teams.
    await db.execute(
        "insert into job_changes (team_id, trajectory_id, job_id, new_status, job)"
        " select 1000 + g % 40, 1, g, 'queued', jsonb_build_object('id', g, 'team_id', 1000 + g % 40,"
        " 'trajectory_id', 1, 'cluster_id', 1, 'kind', 'preprocess', 'name', 'filler', 'status', 'queued',"
        " 'version', 1) from generate_series(1, 20000) g"
    )
    await db.execute("analyze job_changes")
    readers = []
    for partition in range(4):
        reader_db = await asyncpg.connect(url)
        reader = OutboxReader(reader_db, partition, 4)
        await reader.load()
        readers.append(reader)
    try:
        teams = [await db.fetchval("insert into teams (name) values ($1) returning id", f"team {i}") for i in range(8)]
        for team_id in teams:
            await insert_jobs(db, team_id, 3)
        for partition, reader in enumerate(readers):
            read = [c for c in (await read_all(reader)).changes if isinstance(c, Change)]
            assert all(c.job.team_id % 4 == partition for c in read)  # no other partition's row, filler or not
            changes = [c for c in read if c.job.team_id in teams]
            assert sorted({c.job.team_id for c in changes}) == sorted(t for t in teams if t % 4 == partition)
            assert len(changes) == 6  # two teams of three jobs each: its own, none of the others'
        # What the relay asks PostgreSQL: its rows past its cursor, in commit-safe order, from its own index.
        reader = readers[1]
        plan = await db.fetchval("explain (format json) " + reader._read, reader.xid, reader.seq, None, 5000, 0)
        assert "job_changes_team_mod_4" in scanned_indexes(json.loads(plan)), plan
    finally:
        for reader in readers:
            await reader.db.close()


async def test_a_new_partition_count_replaces_the_index_and_a_cut_off_build_is_rebuilt(db: asyncpg.Connection) -> None:
    await outbox.partition_index(db, 4)
    await outbox.partition_index(db, 8)
    assert await indexes(db) == {"job_changes_team_mod_8": True}
    # A build cut off midway (CREATE INDEX CONCURRENTLY killed) leaves an invalid index that writers still keep
    # up: it goes, and the right one is built.
    await db.execute("update pg_index set indisvalid = false where indexrelid = 'job_changes_team_mod_8'::regclass")
    await outbox.partition_index(db, 8)
    assert await indexes(db) == {"job_changes_team_mod_8": True}
    await outbox.partition_index(db, 1)  # back to one partition: (team_id % 1, xid, seq), the (xid, seq) order
    assert await indexes(db) == {"job_changes_team_mod_1": True}


def test_the_partition_filter_is_only_ever_numbers() -> None:
    assert partition_filter(0, 1) == "team_id % 1 = 0"
    assert partition_filter(3, 4) == "team_id % 4 = 3"
    for bad in ((4, 4), (-1, 4), ("0; drop table jobs", 4)):
        with pytest.raises(ValueError):
            partition_filter(*bad)  # type: ignore[arg-type]
