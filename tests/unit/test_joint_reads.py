"""A relay process's busy partitions read the outbox in one statement (gateway.store.joint_reads), against a
real PostgreSQL: each partition gets exactly what it would have read alone, through its partition index."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from gateway.core.aggregate import Change, MembershipChange, SubmissionChange
from gateway.store import outbox
from gateway.store.joint_reads import GATHER, JointReads, joint_statement
from gateway.store.outbox import OutboxReader
from harness.waiting import eventually
from tests.unit.outbox_reads import read_all
from tests.unit.test_outbox_partitions import scanned_indexes
from tests.unit.test_relay_maintenance import insert_jobs

COUNT = 4


@pytest.fixture
async def db(url: str) -> AsyncIterator[asyncpg.Connection]:
    db = await asyncpg.connect(url)
    await outbox.partition_index(db, COUNT)
    yield db
    await db.close()


@pytest.fixture
async def joint(url: str) -> AsyncIterator[JointReads]:
    joint = JointReads(url, COUNT)
    yield joint
    await joint.close()


async def readers_past_their_snapshot(url: str, db: asyncpg.Connection, sets: int = 1) -> list[list[OutboxReader]]:
    """`sets` of one reader per partition, as a relay has them once it has read past its takeover's snapshot."""
    readers = [[OutboxReader(await asyncpg.connect(url), p, COUNT) for p in range(COUNT)] for _ in range(sets)]
    for reader in (r for group in readers for r in group):
        await reader.load()
    team = await db.fetchval("insert into teams (name) values ('warm-up') returning id")
    await insert_jobs(db, team, 1)  # a commit after the snapshots: reading past it ends each one
    for reader in (r for group in readers for r in group):
        # Past the snapshot once the horizon passes it: an open transaction anywhere on the server (other tests,
        # other databases) holds the horizon back meanwhile, so read again until it has moved (or say it never did).
        deadline = time.monotonic() + 60.0
        while True:
            await read_all(reader)
            if not reader.alone:
                break
            assert time.monotonic() < deadline, "the horizon never passed the readers' snapshot"
            await asyncio.sleep(0.05)
    return readers


async def close(readers: list[OutboxReader]) -> None:
    for reader in readers:
        await reader.db.close()


def jobs_of(changes: list[Change | SubmissionChange | MembershipChange]) -> list[tuple[int, int]]:
    """(team, job) of each job change, in the order read."""
    return [(c.job.team_id, c.job.id) for c in changes if isinstance(c, Change)]


async def test_partitions_reading_together_get_what_each_would_have_read_alone_in_one_statement(
    url: str, db: asyncpg.Connection, joint: JointReads
) -> None:
    together, alone = await readers_past_their_snapshot(url, db, sets=2)
    try:
        teams = [await db.fetchval("insert into teams (name) values ($1) returning id", f"team {i}") for i in range(8)]
        for team_id in teams:
            await insert_jobs(db, team_id, 3)
        results = await asyncio.gather(*(joint.read(r) for r in together))
        assert joint.statements == 1
        for own, reader, result in zip(together, alone, results, strict=True):
            # The joint read, then whatever it left (the horizon may lag): exactly what the partition reads alone.
            mine = jobs_of(result.changes) + jobs_of((await read_all(own)).changes)
            assert mine == jobs_of((await read_all(reader)).changes)
            assert sorted({t for t, _ in mine}) == sorted(t for t in teams if t % COUNT == own.partition)
            assert len(mine) == 6  # its two teams' three jobs each, none of the other partitions'
    finally:
        await close(together + alone)


async def test_a_reader_just_taken_over_reads_alone(url: str, db: asyncpg.Connection, joint: JointReads) -> None:
    reader = OutboxReader(await asyncpg.connect(url), 1, COUNT)
    try:
        await reader.load()
        assert reader.alone  # it reads under its load's snapshot, which a joint statement does not carry
        await joint.read(reader)
        assert joint.statements == 0
    finally:
        await reader.db.close()


async def test_a_lost_connection_fails_every_read_in_its_statement_and_the_next_reads_on_a_fresh_one(
    url: str, db: asyncpg.Connection, joint: JointReads
) -> None:
    (readers,) = await readers_past_their_snapshot(url, db)
    try:
        await asyncio.gather(*(joint.read(r) for r in readers))
        assert joint._db is not None
        killed = joint._db.get_server_pid()
        await db.execute("select pg_terminate_backend($1)", killed)
        results = await asyncio.gather(*(joint.read(r) for r in readers), return_exceptions=True)
        # Either the statement ran on the dead connection and every read in it failed, or the loss was seen
        # first and a fresh connection read: never some reads of one statement failed and others not.
        assert len({isinstance(r, Exception) for r in results}) == 1, results
        team = await db.fetchval("insert into teams (name) values ('after') returning id")
        await insert_jobs(db, team, 2)
        changes = [c for r in readers for c in (await read_all_joint(joint, r))]
        assert [c.job.team_id for c in changes if isinstance(c, Change)] == [team, team]
        assert joint._db is not None and joint._db.get_server_pid() != killed
    finally:
        await close(readers)


async def read_all_joint(joint: JointReads, reader: OutboxReader) -> list[Change | SubmissionChange | MembershipChange]:
    """Read jointly until everything committed so far is read (another test's transaction may hold the horizon)."""
    changes: list[Change | SubmissionChange | MembershipChange] = []
    async with asyncio.timeout(30):
        while True:
            changes += (await joint.read(reader)).changes
            if not await reader.peek():
                return changes
            await asyncio.sleep(0.01)


async def test_the_joint_statement_reads_each_partition_through_its_index(db: asyncpg.Connection) -> None:
    # 20,000 captured rows (each a real job's record: a reader whose snapshot an open transaction elsewhere on the
    # server holds back reads them again, and decodes them).
    team = await db.fetchval("insert into teams (name) values ('statistics') returning id")
    await insert_jobs(db, team, 1)
    await db.execute(
        "insert into job_changes (team_id, trajectory_id, job_id, new_status, job)"
        " select g % 40, 1, g, 'queued', (select job from job_changes order by seq limit 1)"
        " from generate_series(1, 20000) g"
    )
    await db.execute("analyze job_changes")
    for cursor in (0, 2**62):  # rows to read, or none (whether more wait behind an open transaction is looked up)
        plan = await db.fetchval(
            "explain (analyze, format json) " + joint_statement(COUNT), [0, 2, 3], [cursor] * 3, [0] * 3, [50] * 3
        )
        assert scanned_indexes(json.loads(plan)) == {"job_changes_team_mod_4"}, plan
        assert '"Seq Scan"' not in plan, plan  # not even where more wait behind an open transaction


async def test_the_joint_statement_is_planned_once_and_its_one_plan_reads_through_the_index(
    url: str, db: asyncpg.Connection, joint: JointReads
) -> None:
    """PostgreSQL's default plans a prepared statement anew at each run while its generic estimate looks
    dearer, and for the joint statement's arrays it always does: planning cost twice the read. JointReads'
    connection takes the generic plan; that plan, whatever the cursors, still goes through the index."""
    # 20,000 captured rows (each a real job's record: a reader whose snapshot an open transaction elsewhere on the
    # server holds back reads them again, and decodes them).
    team = await db.fetchval("insert into teams (name) values ('statistics') returning id")
    await insert_jobs(db, team, 1)
    await db.execute(
        "insert into job_changes (team_id, trajectory_id, job_id, new_status, job)"
        " select g % 40, 1, g, 'queued', (select job from job_changes order by seq limit 1)"
        " from generate_series(1, 20000) g"
    )
    await db.execute("analyze job_changes")
    (readers,) = await readers_past_their_snapshot(url, db)
    try:
        await asyncio.gather(*(joint.read(r) for r in readers))
        assert joint._db is not None and await joint._db.fetchval("show plan_cache_mode") == "force_generic_plan"
    finally:
        await close(readers)
    generic = await outbox.connect(url, generic_plans=True)
    try:
        await generic.execute(f"prepare joint (int[], bigint[], bigint[], int[]) as {joint_statement(COUNT)}")
        for cursor in (0, 2**62):
            plan = await generic.fetchval(
                f"explain (analyze, format json) execute joint ('{{0,2,3}}', '{{{cursor},{cursor},{cursor}}}',"
                " '{0,0,0}', '{50,50,50}')"
            )
            assert scanned_indexes(json.loads(plan)) == {"job_changes_team_mod_4"}, plan
            assert '"Seq Scan"' not in plan, plan
    finally:
        await generic.close()


async def test_a_batch_gathered_while_the_last_one_runs_waits_for_it(
    url: str, db: asyncpg.Connection, joint: JointReads
) -> None:
    """One connection runs one statement at a time: reads that gather while a statement runs go next."""
    (readers,) = await readers_past_their_snapshot(url, db)
    try:
        first = asyncio.gather(*(joint.read(r) for r in readers[:2]))
        await asyncio.sleep(GATHER * 2)  # the first batch has started
        second = asyncio.gather(*(joint.read(r) for r in readers[2:]))
        results = await asyncio.gather(first, second)
        assert [len(batch) for batch in results] == [2, 2] and joint.statements == 2
    finally:
        await close(readers)


async def test_warmed_at_start_the_first_joint_read_finds_its_connection_open_and_its_plan_made(
    url: str, db: asyncpg.Connection, joint: JointReads
) -> None:
    """The relay warms its joint reads when it starts: the first busy moment then pays no connection, no type
    look-up and no planning (about 10 ms in its cycle otherwise)."""
    joint.warm()
    await eventually(lambda: joint._db is not None and not joint._running, "the warm-up")
    assert joint._db is not None
    backend = joint._db.get_server_pid()
    plans = "select generic_plans, custom_plans from pg_prepared_statements where statement = $1"
    assert [tuple(r) for r in await joint._db.fetch(plans, joint_statement(COUNT))] == [(1, 0)]
    assert joint.statements == 0  # the warm-up read no partition
    (readers,) = await readers_past_their_snapshot(url, db)
    try:
        results = await asyncio.gather(*(joint.read(r) for r in readers))
    finally:
        await close(readers)
    assert joint.statements == 1 and all(result.changes == [] for result in results)
    assert joint._db.get_server_pid() == backend  # the same connection, and the same plan run again
    assert [tuple(r) for r in await joint._db.fetch(plans, joint_statement(COUNT))] == [(2, 0)]
