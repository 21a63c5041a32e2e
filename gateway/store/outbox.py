"""Tail the outbox in commit-safe order.

Concurrent transactions commit out of sequence order, so reading `seq > last` would skip a transaction that
commits late. Each outbox row records its transaction id; the reader only takes rows whose transaction is
older than the oldest one still running (`pg_snapshot_xmin(pg_current_snapshot())`): all of those have
ended, so nothing below that horizon can appear any more. Rows are read in (xid, seq) order past a cursor.
A forgotten open transaction holds the horizon back: `held_back` says so and `blocker()` names it.

Writers NOTIFY `job_changes` only while the partition's relay says it sleeps (`relay_wakeup.sleeping`):
NOTIFY serialises commits, so a busy relay polls instead (docs/operations.md, "Waking the relay").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg
import msgspec

from .. import tracing
from ..core.aggregate import AnyChange, Change, MembershipChange, OwnershipChange, SubmissionChange, TrajectoryAggregate
from ..core.model import Job
from ..core.submission import SubmissionAggregate, SubmissionRecord
from ..core.work_snapshot import WorkSnapshot
from . import eta, submission_rows, waves
from .queries import AGGREGATES, GROUP_COUNTS, add_group_counts, aggregate_of

_job_decoder = msgspec.json.Decoder(Job)
_submission_decoder = msgspec.json.Decoder(SubmissionRecord)
# What takes a start's submissions, a part at a time (gateway.core.batching.Batcher.load_submissions).
SubmissionsSink = Callable[[list[tuple[SubmissionAggregate, bytes | None]]], None]
_membership_decoder = msgspec.json.Decoder(MembershipChange)
_ownership_decoder = msgspec.json.Decoder(OwnershipChange)

# The horizon: every transaction below it has ended, so no row below it can appear any more.
HORIZON = "with h as (select pg_snapshot_xmin(pg_current_snapshot())::text::bigint as horizon)\n"
# A partition's rows past its cursor, below the horizon (one row of nulls when there are none), and whether more
# wait behind an open transaction. {part} is the partition: its number written in for one partition (`team_id % 4
# = 1`: a parameter would hide the expression from the planner, which then could not match the partition's index,
# `partition_index`), or, for several read in one statement (gateway.store.joint_reads), the column of the list
# {partitions} adds to the FROM, which the planner matches to the index as a join condition.
READ_PARTITION = """
select {part} as part, h.horizon, c.xid, c.seq, c.entity, c.old_status, c.new_status, c.job::text as job,
       {counted} as counted, b.held is not null as held_back, c.trace_context
from h{partitions}
left join lateral (
    select xid, seq, entity, old_status, new_status, job, trace_context from job_changes
    where team_id % {count} = {part} and (xid, seq) > ({xid}::bigint, {seq}::bigint) and xid < h.horizon
    order by xid, seq
    limit {limit}
) c on true
left join lateral (
    select true as held from job_changes
    where c.seq is null and team_id % {count} = {part} and xid >= h.horizon
    limit 1
) b on true
"""
# A row counts toward the aggregates loaded at takeover if that snapshot ($3, its xmin $5) saw it.
_SEEN_BY_LOAD = (
    "($3::text is not null and (c.xid < $5 or pg_visible_in_snapshot(c.xid::text::xid8, $3::text::pg_snapshot)))"
)
_PEEK = "select exists (select 1 from job_changes where {mine} and (xid, seq) > ($1::bigint, $2::bigint))"
_INDEX_PREFIX = "job_changes_team_mod_"
_INDEX_LOCK = 0x6F7574626F78  # "outbox": one relay builds or drops partition indexes at a time


def partition_filter(partition: int, count: int) -> str:
    """The SQL condition for one partition's outbox rows (it names `team_id`, of whichever table is in scope)."""
    if not (isinstance(partition, int) and isinstance(count, int) and 0 <= partition < count):
        raise ValueError(f"partition {partition!r} of {count!r}")
    return f"team_id % {count} = {partition}"


async def partition_index(db: asyncpg.Connection, count: int, poll: float = 0.2) -> None:
    """Return once the outbox has its index on (team_id % count, xid, seq), through which each of `count`
    relays reads its own rows rather than every partition's (the outbox has no other index on xid: the
    planner cannot take one that would scan all partitions). One relay at a time builds it, CONCURRENTLY
    (writers go on), and drops those of other counts; the others look again every `poll` seconds (a blocking
    lock wait would hold a snapshot that the concurrent build itself waits for)."""
    wanted = f"{_INDEX_PREFIX}{count}"
    while True:
        indexes = await _partition_indexes(db)
        if indexes.get(wanted) and len(indexes) == 1:
            return
        if await db.fetchval("select pg_try_advisory_lock($1)", _INDEX_LOCK):
            break
        if indexes.get(wanted):
            return  # ours is there; whoever holds the lock is dropping the others
        await asyncio.sleep(poll)
    try:
        indexes = await _partition_indexes(db)
        if indexes.get(wanted) is False:  # a build that was cut off: writers keep it up, readers cannot use it
            await db.execute(f"drop index concurrently if exists {wanted}")
        await db.execute(
            f"create index concurrently if not exists {wanted} on job_changes ((team_id % {count}), xid, seq)"
        )
        for name in indexes:
            if name != wanted:
                await db.execute(f"drop index concurrently if exists {name}")
    finally:
        await db.execute("select pg_advisory_unlock($1)", _INDEX_LOCK)


async def _partition_indexes(db: asyncpg.Connection) -> dict[str, bool]:
    """The outbox's partition indexes, each with whether it is valid (usable)."""
    rows = await db.fetch(
        "select c.relname, i.indisvalid from pg_index i join pg_class c on c.oid = i.indexrelid"
        " where i.indrelid = 'job_changes'::regclass and c.relname like $1",
        _INDEX_PREFIX + "%",
    )
    return {r["relname"]: r["indisvalid"] for r in rows}


CHANNEL = "job_changes"  # writers NOTIFY `job_changes_<partition>` while the partition's relay sleeps


async def connect(database_url: str, generic_plans: bool = False) -> asyncpg.Connection:
    """The relay's connection for reading the outbox (and listening for wake-ups). `generic_plans`: every
    statement is planned once, when first run, whatever its parameters (only for a connection whose statements
    all have a good generic plan: the joint read's does, the peek's and the pruning's do not)."""
    settings = {"application_name": "gateway-relay-outbox"}
    if generic_plans:
        settings["plan_cache_mode"] = "force_generic_plan"
    return await asyncpg.connect(database_url, server_settings=settings)


async def listen(db: asyncpg.Connection, partition: int, wake: Callable[[], None]) -> None:
    """Call `wake` on each writer's NOTIFY for the partition (its channel: `job_changes_<partition>`), and when
    the connection is lost: a relay asleep then reads at once, fails and stops serving, where it would have
    found out only at its next look."""
    await db.add_listener(f"{CHANNEL}_{partition}", lambda *_: wake())
    db.add_termination_listener(lambda _: wake())


async def register_wakeup(db: asyncpg.Connection, partition: int, partitions: int) -> None:
    """Give the partition its wake-up flag, with the partition count writers compute its teams by; partition 0
    also drops the flags of partitions that no longer exist (fewer partitions than before: their rows would
    have writers NOTIFY for nobody)."""
    await db.execute(
        "insert into relay_wakeup (partition, partitions) values ($1, $2)"
        " on conflict (partition) do update set partitions = excluded.partitions",
        partition,
        partitions,
    )
    if partition == 0:
        await db.execute("delete from relay_wakeup where partition >= $1", partitions)


async def set_sleeping(db: asyncpg.Connection, partition: int, sleeping: bool) -> None:
    """Ask writers of the partition's teams to NOTIFY (sleeping) or not (polling)."""
    await db.execute("update relay_wakeup set sleeping = $2 where partition = $1", partition, sleeping)


async def trajectories(db: asyncpg.Connection, ids: list[int]) -> list[tuple[int, int, str]]:
    """(id, team, name) of trajectories the relay has not seen yet."""
    rows = await db.fetch("select id, team_id, name from trajectories where id = any($1::bigint[])", ids)
    return [(r["id"], r["team_id"], r["name"]) for r in rows]


@dataclass
class ReadResult:
    changes: list[AnyChange]
    horizon: int
    held_back: bool  # committed changes wait behind an open transaction
    full: bool  # the limit was reached: read again at once
    commits: int = 0  # how many transactions the changes came from: the writers' pace, whatever the relay's
    traces: list[str] | None = None  # the changes' trace contexts, once each (read only while tracing is on)


@dataclass
class Blocker:
    pid: int
    xid: int
    age_seconds: float
    state: str
    query: str
    database: str = ""  # pg_snapshot_xmin counts every database of the server: it may be another's
    elsewhere: bool = False  # in a database other than the relay's


async def held_open_elsewhere(dsn: str, older_than: float) -> list[Blocker]:
    """Transactions of other databases on the same server open longer than `older_than` seconds: each one holds
    every relay's horizon back as long as it stays open (`gateway check` warns of them)."""
    db = await asyncpg.connect(dsn)
    try:
        rows = await db.fetch(
            "select pid, backend_xid::text::bigint as xid, state, left(query, 200) as query,"
            " extract(epoch from clock_timestamp() - xact_start)::float8 as age, coalesce(datname, '') as database"
            " from pg_stat_activity where backend_xid is not null and datname is distinct from current_database()"
            " and xact_start < clock_timestamp() - make_interval(secs => $1) order by xact_start",
            older_than,
        )
    finally:
        await db.close()
    return [
        Blocker(r["pid"], r["xid"], r["age"], r["state"] or "", r["query"] or "", r["database"], True) for r in rows
    ]


class OutboxReader:
    """Reads one partition's captured changes past a cursor (a team is in partition `team_id % count`);
    `load()` rebuilds its aggregates from one consistent snapshot."""

    def __init__(self, db: asyncpg.Connection, partition: int = 0, count: int = 1) -> None:
        self.db = db
        self.partition = partition
        self.count = count
        mine = partition_filter(partition, count)  # checks both are numbers: they are written into the SQL
        self._read = HORIZON + READ_PARTITION.format(
            part=partition, partitions="", count=count, counted=_SEEN_BY_LOAD, xid="$1", seq="$2", limit="$4"
        )
        self._peek = _PEEK.format(mine=mine)
        self.xid = 0
        self.seq = 0
        self._base_snapshot: str | None = None
        self._base_xmin = 0
        self._base_xmax = 0
        self.waves: list[asyncpg.Record] = []  # trajectory_waves as of the snapshot
        self.submissions: dict[int, SubmissionAggregate] = {}  # as of the snapshot
        self.saved_rows: dict[
            int, bytes
        ] = {}  # digests of the Submissions page's rows as saved (store.submission_rows)
        self.work = WorkSnapshot()  # unfinished work and recent durations, for the estimates of time left

    @property
    def position(self) -> str:
        """The cursor past the last row read, as stored between relays."""
        return f"{self.xid}:{self.seq}"

    async def load(
        self, published: str | None = None, submissions: SubmissionsSink | None = None
    ) -> list[TrajectoryAggregate]:
        """Every trajectory's counts as of one snapshot, and the partition's submissions of the same snapshot handed
        to `submissions` a part at a time (each with its saved row's digest), so none is held here.

        Reading then starts after `published` (where the previous relay had published up to): rows the
        snapshot already saw come back marked `counted`, so their deltas go out without being counted twice.
        """
        async with self.db.transaction(isolation="repeatable_read", readonly=True):
            snapshot: str = await self.db.fetchval("select pg_current_snapshot()::text")
            rows = await self.db.fetch(AGGREGATES, None)
            group_rows = await self.db.fetch(GROUP_COUNTS, None)
            if submissions is not None:
                async for part in submission_rows.load(self.db, self.count, self.partition):
                    submissions(part)
            self.waves = await waves.load(self.db)
            self.work = await eta.snapshot(self.db, self.count, self.partition)
        xmin, xmax, _ = snapshot.split(":")
        self._base_snapshot, self._base_xmin, self._base_xmax = snapshot, int(xmin), int(xmax)
        self.xid, self.seq = int(xmin) - 1, 2**62  # nothing older than the snapshot's xmin by default
        if published is not None:
            xid, _, seq = published.partition(":")
            if xid.isdigit() and seq.isdigit() and (int(xid), int(seq)) < (self.xid, self.seq):
                self.xid, self.seq = int(xid), int(seq)
        trajectories = {r["id"]: aggregate_of(r) for r in rows if self.mine(r["team_id"])}
        self.waves = [w for w in self.waves if w["trajectory_id"] in trajectories]
        add_group_counts(trajectories, group_rows)
        return list(trajectories.values())

    def mine(self, team_id: int) -> bool:
        return team_id % self.count == self.partition

    async def read(self, limit: int = 5000) -> ReadResult:
        rows = await self.db.fetch(self._read, self.xid, self.seq, self._base_snapshot, limit, self._base_xmin)
        return self.take(rows, limit)

    @property
    def alone(self) -> bool:
        """Whether this reader must read on its own: just after a takeover it reads under the snapshot its state
        was loaded from (rows that snapshot saw come back `counted`), which a joint read does not carry."""
        return self._base_snapshot is not None

    def take(self, rows: list[asyncpg.Record], limit: int) -> ReadResult:
        """The changes of one read's rows (one row with no change when there was none), the cursor moved past."""
        horizon: int = rows[0]["horizon"]
        changes: list[AnyChange] = []
        commits, last_xid = 0, None
        for r in rows:
            if r["seq"] is None:
                break
            if r["xid"] != last_xid:  # rows come in (xid, seq) order: one run of an xid is one transaction
                commits, last_xid = commits + 1, r["xid"]
            if r["entity"] == "membership":
                changes.append(_membership_decoder.decode(r["job"]))
                self.xid, self.seq = r["xid"], r["seq"]
                continue
            if r["entity"] == "ownership":
                changes.append(_ownership_decoder.decode(r["job"]))
                self.xid, self.seq = r["xid"], r["seq"]
                continue
            if r["entity"] == "submission":
                changes.append(SubmissionChange(record=_submission_decoder.decode(r["job"]), counted=r["counted"]))
                self.xid, self.seq = r["xid"], r["seq"]
                continue
            changes.append(
                Change(
                    old_status=r["old_status"],
                    new_status=r["new_status"],
                    job=_job_decoder.decode(r["job"]),
                    counted=r["counted"],
                )
            )
            self.xid, self.seq = r["xid"], r["seq"]
        if self._base_snapshot is not None and horizon >= self._base_xmax and len(changes) < limit:
            self._base_snapshot = None  # every transaction the snapshot could have seen is behind us
        traces = _traces(rows) if tracing.enabled else None
        return ReadResult(changes, horizon, bool(rows[0]["held_back"]), len(changes) >= limit, commits, traces)

    async def peek(self) -> bool:
        """Whether anything of the partition was captured past the cursor (committed, readable or not yet)."""
        return bool(await self.db.fetchval(self._peek, self.xid, self.seq))

    async def blocker(self, horizon: int) -> Blocker | None:
        """The open transaction holding the horizon back, for the logs and metrics."""
        row = await self.db.fetchrow(
            "select pid, backend_xid::text::bigint as xid, state, left(query, 200) as query,"
            " extract(epoch from clock_timestamp() - xact_start)::float8 as age,"
            " coalesce(datname, '') as database, datname is distinct from current_database() as elsewhere"
            " from pg_stat_activity where backend_xid is not null"
            " order by age(backend_xid) desc limit 1"
        )
        if row is None:
            return None
        return Blocker(
            row["pid"],
            row["xid"],
            row["age"] or 0.0,
            row["state"] or "",
            row["query"] or "",
            row["database"],
            row["elsewhere"],
        )


def _traces(rows: list[asyncpg.Record]) -> list[str] | None:
    """The trace contexts the rows carry, each once, in order (one request's rows share theirs)."""
    found = dict.fromkeys(r["trace_context"] for r in rows if r["seq"] is not None and r["trace_context"])
    return list(found) or None
