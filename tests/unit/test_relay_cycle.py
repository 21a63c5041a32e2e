"""The relay's publish cycle (gateway.relay.cycle, carrying out gateway.core.publish_cycle) over the in-memory bus and a real PostgreSQL.

Each test starts a relay's epoch as a takeover does (fence, snapshot, waves) on a fresh memory bus, writes jobs
with plain SQL, and runs cycles by hand: read the outbox, publish. No relay process, no Redis.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg
import msgspec
import pytest

from gateway.bus.memory import MemoryBroker
from gateway.bus.publisher import Fenced
from gateway.core import channels
from gateway.core.aggregate import Change, MembershipChange, MembershipsChanged, OwnershipsChanged, SubmissionChange
from gateway.core.batching import Batcher
from gateway.core.model import Job
from gateway.core.protocol import Batch, Glow, Notice, Summary, decode_server
from gateway.core.team import ClusterStats, Presence
from gateway.relay.cycle import RelayCycle, oldest_commit
from gateway.relay.metrics import PartitionFigures
from gateway.relay.ownership import HeldLock, LostLock
from gateway.relay.partition import load_state
from gateway.store import outbox, partitions
from gateway.store.outbox import OutboxReader, ReadResult
from harness.waiting import eventually

HISTORY = 100


@pytest.fixture
async def writer(url: str) -> AsyncIterator[asyncpg.Connection]:
    db = await asyncpg.connect(url)
    yield db
    await db.close()


@dataclass
class Team:
    id: int
    cluster_id: int
    trajectory_id: int


async def make_team(db: asyncpg.Connection) -> Team:
    name = secrets.token_hex(3)
    team_id = await db.fetchval("insert into teams (name) values ($1) returning id", f"team {name}")
    cluster_id = await db.fetchval("insert into clusters (team_id, name) values ($1, 'gpu-1') returning id", team_id)
    trajectory_id = await db.fetchval(
        "insert into trajectories (team_id, name) values ($1, $2) returning id", team_id, f"trajectory {name}"
    )
    return Team(team_id, cluster_id, trajectory_id)


async def insert_jobs(db: asyncpg.Connection, team: Team, n: int) -> list[int]:
    rows = await db.fetch(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame)"
        " select $1, $2, $3, 'preprocess', 'Preprocess trajectory frame', f from generate_series(0, $4 - 1) f"
        " returning id",
        team.id,
        team.trajectory_id,
        team.cluster_id,
        n,
    )
    return [r["id"] for r in rows]


class NoExtras:
    """Presence and cluster metrics are not this module's subject (tests/integration/test_team_extras.py)."""

    next_due = float("inf")

    async def collect(self, db: asyncpg.Connection, now: float) -> list[tuple[int, Presence | ClusterStats]]:
        return []


async def lock_held() -> None:
    pass


@dataclass
class Relaying:
    """One relay epoch on the memory bus: its cycle and what it announced."""

    broker: MemoryBroker
    cycle: RelayCycle
    announced: list[MembershipsChanged | OwnershipsChanged]

    @property
    def tag(self) -> str:
        return self.broker.partitions.tags[0]

    async def read(self) -> ReadResult:
        """Read until everything committed so far is read: another database's open transaction (other tests
        share the server) may hold the horizon back for a while, as any open transaction does."""
        changes: list[Change | SubmissionChange | MembershipChange] = []
        deadline = time.monotonic() + 30.0
        while True:
            result = await self.cycle.read()
            changes += result.changes
            if not await self.cycle.reader.peek():
                return ReadResult(changes, result.horizon, held_back=False, full=False)
            assert time.monotonic() < deadline, "the outbox stayed held back"
            await asyncio.sleep(0.01)

    async def run(self) -> ReadResult:
        """A cycle: read (everything committed so far), then publish."""
        result = await self.read()
        await self.cycle.publish(result, time.monotonic())
        return result

    async def reading(self) -> None:
        """Until a cycle started in a task has read its changes (into the batcher)."""
        core = self.cycle.core
        applied = core.changes_applied
        await eventually(lambda: core.changes_applied > applied, "the changes applied", timeout=30)

    async def publishing(self) -> None:
        """Until a cycle started in a task has read its changes and tried to publish them."""
        core = self.cycle.core
        taken = core.deltas_taken
        await eventually(lambda: core.deltas_taken > taken, "the deltas taken", timeout=30)

    async def messages(self, channel: str) -> list[object]:
        entries = await self.broker.history.entries(self.tag, channel, 1)
        return [decode_server(e.msgpack, "msgpack") for e in entries]


@pytest.fixture
async def relays(url: str) -> AsyncIterator[list[asyncpg.Connection]]:
    """The relays' outbox connections, closed after the test."""
    opened: list[asyncpg.Connection] = []
    yield opened
    for db in opened:
        db.terminate()


async def take_over(
    url: str,
    opened: list[asyncpg.Connection],
    broker: MemoryBroker,
    epoch: int,
    settle: float = 0.5,
    prove_lock: Callable[[], Awaitable[None]] = lock_held,
) -> Relaying:
    """What a relay does when it takes a partition over, up to its first cycle."""
    db = await outbox.connect(url)
    opened.append(db)
    reader = OutboxReader(db)
    publisher = broker.publisher(broker.partitions.tags[0], epoch, HISTORY, 3600)
    await publisher.take_over()
    core = Batcher(epoch, settle)
    await load_state(db, reader, publisher, core)
    announced: list[MembershipsChanged | OwnershipsChanged] = []

    async def announce(announcement: MembershipsChanged | OwnershipsChanged) -> None:
        announced.append(announcement)

    cycle = RelayCycle(db, reader, core, publisher, NoExtras(), prove_lock, announce, PartitionFigures())
    return Relaying(broker, cycle, announced)


async def test_a_cycle_publishes_the_coalesced_changes_with_their_positions_and_the_outbox_cursor(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    team = await make_team(writer)
    relay = await take_over(url, relays, MemoryBroker(), epoch=3)
    await relay.run()  # the first cycle sends every team's whole state
    ids = await insert_jobs(writer, team, 3)
    await writer.execute("update jobs set status = 'running' where id = $1", ids[0])
    before = relay.cycle.published
    result = await relay.run()
    assert sum(isinstance(c, Change) for c in result.changes) == 4  # (and the submission the jobs made)
    trajectory, team_jobs = channels.trajectory(team.trajectory_id), channels.team_jobs(team.id)
    for channel in (trajectory, team_jobs):
        (batch,) = await relay.messages(channel)
        assert isinstance(batch, Batch) and batch.cursor == "3-1"
        assert {j.id: j.status for j in batch.jobs} == {ids[0]: "running", ids[1]: "queued", ids[2]: "queued"}
        assert await relay.broker.history.position(relay.tag, channel) == (3, 1)
    assert relay.broker.space.cursors[relay.tag] == relay.cycle.reader.position
    # Every message went to a channel's history: the cycle counted them all (its heartbeat and /metrics figures).
    kept = sum(len(stream.entries) for stream in relay.broker.space.streams.values())
    assert relay.cycle.published == relay.cycle.figures.published == kept > before
    assert relay.cycle.figures.commit_to_publish.count == 4


async def test_a_successor_continues_each_channel_s_sequence_and_replays_nothing_published(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    team = await make_team(writer)
    broker = MemoryBroker()
    first = await take_over(url, relays, broker, epoch=3)
    await first.run()
    await insert_jobs(writer, team, 2)
    await first.run()
    successor = await take_over(url, relays, broker, epoch=4)
    result = await successor.run()
    assert result.changes == []  # the outbox up to the predecessor's cursor is not read again
    (job,) = await insert_jobs(writer, team, 1)
    await successor.run()
    batches = await successor.messages(channels.trajectory(team.trajectory_id))
    assert [(b.seq, b.cursor) for b in batches if isinstance(b, Batch)] == [(1, "3-1"), (2, "4-2")]
    assert [j.id for j in batches[-1].jobs] == [job]  # type: ignore[attr-defined]


async def test_changes_a_relay_died_before_publishing_go_out_with_its_successor_on_a_bus_with_no_cursor(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    """The first relay on a new bus (or one restarted empty) takes over and dies before its first publish; the
    jobs written meanwhile are in its successor's snapshot, yet their deltas must still go out: a subscriber
    that read the jobs before them waits for them."""
    team = await make_team(writer)
    broker = MemoryBroker()
    await take_over(url, relays, broker, epoch=3)  # and dies
    ids = await insert_jobs(writer, team, 2)
    await writer.execute("update jobs set status = 'running' where id = $1", ids[0])
    successor = await take_over(url, relays, broker, epoch=4)
    await successor.run()
    (batch,) = await successor.messages(channels.trajectory(team.trajectory_id))
    assert isinstance(batch, Batch) and {j.id: j.status for j in batch.jobs} == {ids[0]: "running", ids[1]: "queued"}
    # The successor's state counted them already: once, not twice.
    (summary,) = [m for m in await successor.messages(channels.team(team.id)) if isinstance(m, Summary)][-1:]
    assert (summary.counts.running, summary.counts.queued) == (1, 1)


async def test_a_relay_fenced_out_by_a_newer_one_publishes_nothing(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    team = await make_team(writer)
    broker = MemoryBroker()
    old = await take_over(url, relays, broker, epoch=3)
    await old.run()
    cursor = broker.space.cursors.get(old.tag)
    await broker.publisher(old.tag, 4, HISTORY, 3600).take_over()
    await insert_jobs(writer, team, 1)
    result = await old.read()
    with pytest.raises(Fenced):
        await old.cycle.publish(result, time.monotonic())
    assert await broker.history.position(old.tag, channels.trajectory(team.trajectory_id)) is None
    assert broker.space.cursors.get(old.tag) == cursor


async def test_a_relay_whose_lock_is_lost_stops_before_anything_goes_out(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    team = await make_team(writer)
    lock = HeldLock(await partitions.lock_connection(url), 0)
    relay = await take_over(url, relays, MemoryBroker(), epoch=3, prove_lock=lock.prove)
    lock.release()  # its session ends: PostgreSQL has released the lock
    await insert_jobs(writer, team, 1)
    result = await relay.read()
    with pytest.raises(LostLock):
        await relay.cycle.publish(result, time.monotonic())
    assert await relay.broker.history.position(relay.tag, channels.trajectory(team.trajectory_id)) is None


async def test_a_cycle_waits_for_a_bus_that_is_away_and_loses_nothing(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    team = await make_team(writer)
    relay = await take_over(url, relays, MemoryBroker(), epoch=3)
    await relay.run()
    ids = await insert_jobs(writer, team, 2)
    relay.broker.lose_connection()
    cycle = asyncio.create_task(relay.run())
    await relay.reading()
    await asyncio.sleep(0.3)
    assert not cycle.done()  # retrying: the cycle is kept, not dropped
    relay.broker.restore_connection()
    await asyncio.wait_for(cycle, 5)
    (batch,) = await relay.messages(channels.trajectory(team.trajectory_id))
    assert isinstance(batch, Batch) and sorted(j.id for j in batch.jobs) == ids


async def test_a_bus_that_came_back_empty_is_fenced_again_and_given_every_team_s_whole_state(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    team = await make_team(writer)
    relay = await take_over(url, relays, MemoryBroker(), epoch=3)
    await insert_jobs(writer, team, 2)
    await relay.run()
    await asyncio.sleep(0.3)  # the team channel's interval has passed
    (job,) = await insert_jobs(writer, team, 1)
    relay.broker.restart()  # its data is gone
    relay.broker.lose_connection()
    cycle = asyncio.create_task(relay.run())
    await relay.publishing()  # and failing: it waits to try again (first whether the bus lost the fence)
    relay.broker.restore_connection()
    await asyncio.wait_for(cycle, 5)
    assert await relay.broker.channels.fence(relay.tag) == 3
    state = await relay.broker.channels.state(relay.tag, channels.team(team.id))
    summaries = [m for m in await relay.messages(channels.team(team.id)) if isinstance(m, Summary)]
    assert summaries and summaries[-1].counts.total() == 3 and b"counts" in state
    batches = await relay.messages(channels.trajectory(team.trajectory_id))
    assert [j.id for b in batches if isinstance(b, Batch) for j in b.jobs] == [job]


async def test_a_bus_failed_over_to_a_replica_behind_is_given_every_team_s_whole_state_with_the_next_cycle(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    team = await make_team(writer)
    relay = await take_over(url, relays, MemoryBroker(), epoch=3)
    await insert_jobs(writer, team, 2)
    await relay.run()
    replica = relay.broker.replica()  # it receives nothing more
    await asyncio.sleep(0.3)  # the team channel's interval has passed
    await insert_jobs(writer, team, 1)
    await relay.run()
    relay.broker.fail_over(replica)  # the team's stored counts are 2 again
    await insert_jobs(writer, team, 1)
    await asyncio.wait_for(relay.run(), 5)
    state = await relay.broker.channels.state(relay.tag, channels.team(team.id))
    summaries = [m for m in await relay.messages(channels.team(team.id)) if isinstance(m, Summary)]
    assert summaries[-1].counts.total() == 4 and int(state[b"seq"]) == summaries[-1].seq


async def test_a_bus_failed_over_to_a_replica_behind_is_found_out_with_nothing_to_publish(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    team = await make_team(writer)
    relay = await take_over(url, relays, MemoryBroker(), epoch=3)
    await insert_jobs(writer, team, 2)
    await relay.run()
    replica = relay.broker.replica()
    await asyncio.sleep(0.3)
    await insert_jobs(writer, team, 1)
    await relay.run()
    relay.broker.fail_over(replica)
    await relay.cycle.check_bus(time.monotonic())  # the relay's loop turns: no change to publish
    summaries = [m for m in await relay.messages(channels.team(team.id)) if isinstance(m, Summary)]
    assert summaries[-1].counts.total() == 3
    assert not await relay.cycle.publisher.behind()


async def test_a_finish_goes_out_once_even_when_its_relay_died_before_recording_it(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    team = await make_team(writer)
    broker = MemoryBroker()
    relay = await take_over(url, relays, broker, epoch=3, settle=0.0)
    await relay.run()
    ids = await insert_jobs(writer, team, 2)
    await relay.run()  # the wave opens: recorded
    assert await writer.fetchval("select open from trajectory_waves where trajectory_id = $1", team.trajectory_id)
    await writer.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
    await relay.run()
    trajectory, team_channel = channels.trajectory(team.trajectory_id), channels.team(team.id)
    notices = [m for m in await relay.messages(trajectory) if isinstance(m, Notice)]
    glows = [m for m in await relay.messages(team_channel) if isinstance(m, Glow)]
    assert [(n.wave, n.level) for n in notices] == [(1, "success")] and [g.wave for g in glows] == [1]
    assert not await writer.fetchval("select open from trajectory_waves where trajectory_id = $1", team.trajectory_id)
    # A relay that published the finish and died before recording it: its successor must not repeat it.
    await writer.execute("update trajectory_waves set open = true where trajectory_id = $1", team.trajectory_id)
    successor = await take_over(url, relays, broker, epoch=4, settle=0.0)
    await successor.run()
    assert [m for m in await successor.messages(trajectory) if isinstance(m, Notice)] == notices
    assert not await writer.fetchval("select open from trajectory_waves where trajectory_id = $1", team.trajectory_id)


@pytest.mark.parametrize(
    ("replayed", "done_in_gap", "failed_in_gap"),
    [(True, False, False), (True, True, False), (False, False, False), (False, False, True)],
    ids=["rows-replayed", "finished-unseen", "bus-without-cursor", "failed-before-a-takeover-on-a-bus-without-cursor"],
)
async def test_work_that_started_while_no_relay_read_still_finishes_with_a_notice(
    url: str,
    writer: asyncpg.Connection,
    relays: list[asyncpg.Connection],
    replayed: bool,
    done_in_gap: bool,
    failed_in_gap: bool,
) -> None:
    """Analyses written between one relay's end and its successor's snapshot, on a trajectory whose earlier work
    finished: no relay saw their wave start, and the successor must still finish it. `replayed`: the bus holds
    the first relay's cursor, so the successor reads the rows again (its state counts them already); otherwise
    the bus has no cursor (it restarted empty) and the successor reads from its snapshot on. `done_in_gap`: the
    work completed before the successor's snapshot too, one analysis failing. `failed_in_gap`: one analysis failed
    before the snapshot and the others run on: the successor reads nothing of that failure (the bus has no cursor),
    yet the notice must say "with errors"."""
    team = await make_team(writer)
    broker = MemoryBroker()
    first = await take_over(url, relays, broker, epoch=3, settle=0.0)
    await first.run()
    earlier = await insert_jobs(writer, team, 1)
    await first.run()
    await writer.execute("update jobs set status = 'completed' where id = any($1::bigint[])", earlier)
    await first.run()
    await first.run()
    trajectory, team_channel = channels.trajectory(team.trajectory_id), channels.team(team.id)
    assert [n.wave for n in await first.messages(trajectory) if isinstance(n, Notice)] == [1]
    if not replayed:
        broker = MemoryBroker()  # a bus that restarted empty
    analyses = await writer.fetch(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame)"
        " select $1, $2, $3, 'analysis', 'Analysis plugin', f from generate_series(0, 2) f returning id",
        team.id,
        team.trajectory_id,
        team.cluster_id,
    )
    ids = [r["id"] for r in analyses]
    if done_in_gap or failed_in_gap:
        await writer.execute("update jobs set status = 'failed', error = 'segfault' where id = $1", ids.pop())
    if done_in_gap:
        await writer.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
    successor = await take_over(url, relays, broker, epoch=4, settle=0.0)
    await successor.run()
    if not done_in_gap:
        assert await writer.fetchval("select open from trajectory_waves where trajectory_id = $1", team.trajectory_id)
        await writer.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
        await successor.run()
    await successor.run()
    notices = [(n.wave, n.title) for n in await successor.messages(trajectory) if isinstance(n, Notice)]
    glows = [g.wave for g in await successor.messages(team_channel) if isinstance(g, Glow)]
    if done_in_gap or failed_in_gap:
        assert notices[-1:] == [(2, "Analysis completed with errors")] and glows[-1:] != [2]
    else:
        assert notices[-1:] == [(2, "Analysis completed successfully!")] and glows[-1:] == [2]
    assert not await writer.fetchval("select open from trajectory_waves where trajectory_id = $1", team.trajectory_id)


async def test_a_wave_a_person_cut_short_closes_silently_and_stays_silent_after_a_takeover(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    """One frame completed, the other was removed while it ran (Remove Running Jobs): no notice, no glow; the
    wave is closed all the same, and a successor that finds it open reads from the jobs that it was cut short."""
    team = await make_team(writer)
    broker = MemoryBroker()
    relay = await take_over(url, relays, broker, epoch=3, settle=0.0)
    await relay.run()
    done, removed = await insert_jobs(writer, team, 2)
    await writer.execute("update jobs set status = 'running' where id = any($1::bigint[])", [done, removed])
    await relay.run()  # the wave opens
    await writer.execute("update jobs set status = 'completed' where id = $1", done)
    await writer.execute("update jobs set removed_at = now() where id = $1", removed)
    await relay.run()
    await relay.run()
    trajectory, team_channel = channels.trajectory(team.trajectory_id), channels.team(team.id)

    async def finishes(r: Relaying) -> list[object]:
        return [m for c in (trajectory, team_channel) for m in await r.messages(c) if isinstance(m, Notice | Glow)]

    assert await finishes(relay) == []
    assert not await writer.fetchval("select open from trajectory_waves where trajectory_id = $1", team.trajectory_id)
    await writer.execute("update trajectory_waves set open = true where trajectory_id = $1", team.trajectory_id)
    successor = await take_over(url, relays, broker, epoch=4, settle=0.0)
    await successor.run()
    await successor.run()
    assert await finishes(successor) == []
    assert not await writer.fetchval("select open from trajectory_waves where trajectory_id = $1", team.trajectory_id)


async def test_membership_changes_are_announced_to_every_node(
    url: str, writer: asyncpg.Connection, relays: list[asyncpg.Connection]
) -> None:
    team = await make_team(writer)
    relay = await take_over(url, relays, MemoryBroker(), epoch=3)
    await relay.run()
    user_id = await writer.fetchval("insert into users (name) values ('someone') returning id")
    await writer.execute("insert into memberships values ($1, $2)", team.id, user_id)
    await writer.execute("delete from memberships where team_id = $1 and user_id = $2", team.id, user_id)
    await relay.run()
    changes = [c for a in relay.announced if isinstance(a, MembershipsChanged) for c in a.changes]
    assert [(c.team_id, c.user_id, c.member) for c in changes] == [(team.id, user_id, True), (team.id, user_id, False)]


def test_a_deleted_jobs_change_is_timed_by_its_delete_not_by_its_last_update() -> None:
    """gateway_delivery_lag_seconds measures commit to write from this stamp: a job deleted a day after its last
    update (retention, its team deleted) was timed from that update, a day of lag for a change written at once."""
    day_ago, now = datetime(2026, 12, 6, 12, tzinfo=UTC), datetime(2026, 12, 7, 12, tzinfo=UTC)
    job = Job(id=1, team_id=1, trajectory_id=1, cluster_id=1, kind="analysis", name="a", status="completed", version=3)
    deleted = Change(
        old_status="completed", new_status=None, job=msgspec.structs.replace(job, updated_at=day_ago, removed_at=now)
    )
    updated = Change(old_status="running", new_status="completed", job=msgspec.structs.replace(job, updated_at=now))
    assert oldest_commit([deleted], 0.0) == now.timestamp()
    assert oldest_commit([updated, deleted], 0.0) == now.timestamp()
    earlier = now.timestamp() - 5
    assert oldest_commit([deleted], earlier) == earlier  # an older change still waiting to go out keeps its time
