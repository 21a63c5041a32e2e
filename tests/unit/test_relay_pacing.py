"""The relay's pace (gateway.relay.pacing) against a real PostgreSQL: writers NOTIFY only while it sleeps, and
their NOTIFY wakes it; while changes come, it reads again without touching the flag."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest
import uvloop

from gateway.relay import pacing
from gateway.relay.pacing import BUSY_POLL, IDLE_POLL, SECOND_LOOK, Pace, Pacer, next_grid_point
from gateway.store import outbox
from gateway.store.outbox import OutboxReader, ReadResult
from tests.unit.outbox_reads import read_all


async def started_pacer(url: str) -> Pacer:
    """Partition 0's pacer on an outbox connection of its own, listening, awake (the caller terminates its db)."""
    db = await outbox.connect(url)
    reader = OutboxReader(db)
    await reader.load()
    pacer = Pacer(db, reader, 0)
    await outbox.listen(db, 0, pacer.wake.set)
    await outbox.register_wakeup(db, 0, 1)
    await pacer.start()
    return pacer


@pytest.fixture
async def pacer(url: str) -> AsyncIterator[Pacer]:
    pacer = await started_pacer(url)
    yield pacer
    pacer.db.terminate()


async def sleeping(url: str) -> bool:
    db = await asyncpg.connect(url)
    try:
        return bool(await db.fetchval("select sleeping from relay_wakeup where partition = 0"))
    finally:
        await db.close()


async def write_a_job(url: str) -> None:
    db = await asyncpg.connect(url)
    try:
        team_id = await db.fetchval("insert into teams (name) values ($1) returning id", secrets.token_hex(3))
        cluster_id = await db.fetchval("insert into clusters (team_id, name) values ($1, 'c') returning id", team_id)
        trajectory_id = await db.fetchval(
            "insert into trajectories (team_id, name) values ($1, 't') returning id", team_id
        )
        await db.execute(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name) values ($1, $2, $3, 'preprocess', 'p')",
            team_id,
            trajectory_id,
            cluster_id,
        )
    finally:
        await db.close()


def idle(horizon: int = 0) -> ReadResult:
    return ReadResult([], horizon, held_back=False, full=False)


async def test_an_idle_relay_asks_writers_to_notify_and_their_commit_wakes_it(url: str, pacer: Pacer) -> None:
    assert not await sleeping(url)  # started awake
    pacer.pace.last_change = time.monotonic() - 1.0  # no change for a second: past the linger
    now = time.monotonic()
    await pacer.wait(idle(), now, now, None, lambda: None)  # falls asleep, looks once more shortly
    assert pacer.asleep and await sleeping(url)
    pacer.before_read()
    far = time.monotonic() + 60.0  # nothing else is due for a minute: only a NOTIFY ends the wait
    now = time.monotonic()
    waiting = asyncio.create_task(pacer.wait(idle(), now, now, None, lambda: far))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    await write_a_job(url)
    assert await asyncio.wait_for(waiting, 10)  # the next cycle reads
    assert pacer.asleep  # woken, it stays marked asleep while changes come slowly


async def fall_asleep(pacer: Pacer) -> None:
    pacer.pace.last_change = time.monotonic() - 1.0  # no change for a second: past the linger
    now = time.monotonic()
    began = asyncio.get_running_loop().time()
    assert await pacer.wait(idle(), now, now, None, lambda: now + 60.0)  # the second look reads
    # Not before the second look is due, by the loop's clock: uvloop's timers count from it, cached at each turn
    # in whole milliseconds, so by time.monotonic() one fires short of its delay by as long as a busy turn took.
    assert pacer.asleep and asyncio.get_running_loop().time() - began >= SECOND_LOOK - 0.002


async def test_asleep_a_cycle_woken_only_for_what_is_due_publishes_without_reading(
    url: str, pacer: Pacer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With writers asked to NOTIFY, no NOTIFY means no commit: a cycle woken for a channel's window or a team's
    summary has nothing to read (at P partitions, such cycles made most of the reads)."""
    monkeypatch.setattr(pacing, "IDLE_POLL", 60.0)  # a slow machine's pause must not make the fallback look due
    await fall_asleep(pacer)
    pacer.before_read()
    now = time.monotonic()
    assert not await pacer.wait(idle(), now, now, None, lambda: now + 0.05)
    await write_a_job(url)  # its NOTIFY arrives while the relay publishes: the next wait ends at once, to read
    async with asyncio.timeout(30):
        while not pacer.wake.is_set():
            await asyncio.sleep(0.01)
    now = time.monotonic()
    assert await pacer.wait(idle(), now, now, None, lambda: now + 60.0)
    assert time.monotonic() - now < 30.0


def test_asleep_a_wait_for_a_due_time_ends_when_it_is_due_on_the_relays_loop(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relay runs on uvloop (gateway.cli), whose timers count whole milliseconds from a clock read at the
    start of the loop's turn. A wait that ended before its due time by the batcher's clock (about a third did) made
    the cycle find nothing due and wait again: several cycles for one team summary or window."""
    monkeypatch.setattr(pacing, "IDLE_POLL", 60.0)  # the cycles only publish: none reads

    async def early_by() -> list[float]:
        pacer = await started_pacer(url)
        try:
            await fall_asleep(pacer)
            early = []
            for i in range(60):
                pacer.before_read()
                now = time.monotonic()
                due = now + 0.002 + i / 4000  # 2 to 17 ms ahead, across the timers' millisecond steps
                assert not await pacer.wait(idle(), now, now, None, lambda due=due: due)
                early.append(due - time.monotonic())
            return [e for e in early if e > 0]
        finally:
            pacer.db.terminate()

    assert uvloop.run(early_by()) == []


async def test_a_lost_connection_wakes_a_sleeping_relay_to_find_out(url: str, pacer: Pacer) -> None:
    """Asleep, a relay reads only on a NOTIFY or a look: its connection lost (PostgreSQL restarted, a network
    cut), it wakes at once, and its read fails and ends its session, instead of serving on unaware."""
    await fall_asleep(pacer)
    pacer.before_read()
    pid = await pacer.db.fetchval("select pg_backend_pid()")
    admin = await asyncpg.connect(url)
    try:
        await admin.execute("select pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    now = time.monotonic()
    assert await asyncio.wait_for(pacer.wait(idle(), now, now, None, lambda: now + 60.0), 30)
    with pytest.raises((asyncpg.InterfaceError, asyncpg.PostgresError, OSError)):
        await read_all(pacer.reader)


async def test_the_first_wake_up_after_falling_asleep_reads_even_when_something_is_due_sooner(
    url: str, pacer: Pacer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second look is for a commit whose writer saw the flag unset (no NOTIFY): a team's summary due before
    it must not turn it into a cycle that only publishes."""
    monkeypatch.setattr(pacing, "IDLE_POLL", 60.0)
    pacer.pace.last_change = time.monotonic() - 1.0  # past the linger: it falls asleep now
    pacer.before_read()
    now = time.monotonic()
    assert await pacer.wait(idle(), now, now, None, lambda: now + SECOND_LOOK / 5)
    assert pacer.asleep


async def test_asleep_a_due_cycle_reads_when_the_last_read_is_idle_poll_old(url: str, pacer: Pacer) -> None:
    """The fallback for a wake-up missed: a due cycle reads anyway once the last read is IDLE_POLL old."""
    await fall_asleep(pacer)
    pacer.before_read()
    pacer.read_at -= IDLE_POLL
    now = time.monotonic()
    assert await pacer.wait(idle(), now, now, None, lambda: now + 0.01)


async def test_a_busy_relay_reads_again_soon_without_touching_the_flag(url: str, pacer: Pacer) -> None:
    await write_a_job(url)
    result = await read_all(pacer.reader)
    assert result.changes
    started = time.monotonic()
    far = started + 60.0  # no channel's window ends for a minute: the relay polls anyway
    await pacer.wait(result, started, time.monotonic(), None, lambda: far)
    assert BUSY_POLL <= time.monotonic() - started < 5.0  # gathers nothing itself: the channels keep their pace
    assert not pacer.asleep and not await sleeping(url)


async def test_windows_ending_before_the_next_poll_wait_for_it(url: str, pacer: Pacer) -> None:
    await write_a_job(url)
    result = await read_all(pacer.reader)
    started = time.monotonic()
    soon = started + BUSY_POLL / 10  # a held channel's window ends sooner: it goes out with the next poll
    await pacer.wait(result, started, time.monotonic(), None, lambda: soon)
    assert time.monotonic() - started >= BUSY_POLL  # at most one cycle per poll, however many windows end
    assert not pacer.asleep


async def test_a_slow_cycle_does_not_add_its_own_time_to_the_wait(url: str, pacer: Pacer) -> None:
    await write_a_job(url)
    result = await read_all(pacer.reader)
    started = time.monotonic() - 1.0  # the cycle began a second ago (a long publish): the next read is due
    waiting = asyncio.create_task(pacer.wait(result, started, time.monotonic(), None, lambda: started + 60.0))
    await asyncio.wait_for(waiting, 5.0)  # not another poll interval, nor the minute to the next due time
    assert not pacer.asleep


async def test_a_partition_of_a_busy_process_polls_though_its_own_changes_come_slowly(url: str, pacer: Pacer) -> None:
    """Spread over partitions, a process's commits come P times further apart in each: a partition asleep that
    finds a change while its process's partitions together find them every few milliseconds polls (and reads
    with them in one statement), as one partition taking all those commits would."""
    await fall_asleep(pacer)
    pacer.process = process = Pace()
    await write_a_job(url)
    pacer.before_read()
    result = await read_all(pacer.reader)
    assert result.changes and pacer.pace.gap > 0.5  # its own: the first in a second
    # Meanwhile the other partitions of the process found changes every few milliseconds, up to now (observed
    # here, after the write and the read: on a busy machine those alone may take longer than the process's pace).
    for _ in range(30):
        process.observe(time.monotonic())
    now = time.monotonic()
    assert await pacer.wait(result, now, now, None, lambda: now + 60.0)
    assert not pacer.asleep and not await sleeping(url)  # polling: writers spared their NOTIFY


def test_the_pace_is_the_writers_not_the_polls() -> None:
    """Polled every BUSY_POLL, commits 25 ms apart are found one by one (a read every 20, 40, 20... ms): slower
    than STEADY_GAP, so the relay sleeps and reads on each NOTIFY, sending each change as it commits. Commits
    10 ms apart are found two a read: the relay keeps polling."""
    slow, fast = Pace(), Pace()
    now = slow.last_change = fast.last_change = 0.0
    committed, found = 0.0, 0
    for _ in range(200):  # 4 s of polls
        now += BUSY_POLL
        while committed + 0.025 <= now:
            committed += 0.025
            found += 1
        if found:
            slow.observe(now, found)
            found = 0
        fast.observe(now, 2)
    assert 0.022 < slow.gap < 0.028 and slow.gap > pacing.STEADY_GAP
    assert abs(fast.gap - 0.010) < 1e-3 and fast.gap < pacing.STEADY_GAP


def test_partitions_awake_in_one_poll_period_read_again_at_the_same_point() -> None:
    """Several partitions of one process, their cycles ending anywhere within a period, read next at the same
    point (so in one statement: gateway.store.joint_reads), the period's end, never sooner than now."""
    base = 1000 * BUSY_POLL
    ends = [base + BUSY_POLL * f for f in (0.0, 0.01, 0.5, 0.99)]
    assert {next_grid_point(now) for now in ends} == {base + BUSY_POLL}
    assert next_grid_point(base + BUSY_POLL) == base + 2 * BUSY_POLL  # exactly on a point: the next one


async def test_a_commit_wakes_only_the_relay_of_its_teams_partition(url: str) -> None:
    """Two partitions asleep: a job of a team of partition 1 wakes partition 1's relay alone (with every relay
    woken by every commit, P partitions made P reads a commit)."""
    wakes = {0: 0, 1: 0}
    listeners = []
    for partition in (0, 1):
        db = await outbox.connect(url)
        await outbox.register_wakeup(db, partition, 2)

        def woken(partition: int = partition) -> None:
            wakes[partition] += 1

        await outbox.listen(db, partition, woken)
        listeners.append(db)
    writer = await asyncpg.connect(url)
    try:
        await writer.execute("update relay_wakeup set sleeping = true")
        team_id = await writer.fetchval("insert into teams (name) values ('odd') returning id")
        while team_id % 2 != 1:
            team_id = await writer.fetchval("insert into teams (name) values ('odd') returning id")
        cluster_id = await writer.fetchval(
            "insert into clusters (team_id, name) values ($1, 'c') returning id", team_id
        )
        trajectory_id = await writer.fetchval(
            "insert into trajectories (team_id, name) values ($1, 't') returning id", team_id
        )
        await writer.execute(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name) values ($1, $2, $3, 'preprocess', 'p')",
            team_id,
            trajectory_id,
            cluster_id,
        )
        for partition in (0, 1):  # after these, each has heard all that came before
            await writer.execute("select pg_notify($1, '')", f"job_changes_{partition}")
        async with asyncio.timeout(30):
            while wakes[0] < 1 or wakes[1] < 2:
                await asyncio.sleep(0.01)
        assert wakes == {0: 1, 1: 2}  # partition 0: its own NOTIFY after the commit only
    finally:
        await writer.close()
        for db in listeners:
            db.terminate()
