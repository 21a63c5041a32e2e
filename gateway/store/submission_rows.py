"""The Submissions page's rows as the relay derived them (table `submission_rows`): saved by the relay before it
publishes them, read by nodes in windows (sorted, filtered, counted) and exported whole.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime

import asyncpg
import msgspec

from ..core.submission import SubmissionAggregate, SubmissionRecord
from ..core.submission_rows import Restored, SavedRow
from ..core.submission_window import Window, words_query
from .reads import bounded

# The rows come as one JSON array (`_Saved` each): one parameter to encode, not 18 arrays of them (a save of 8 to
# 40 rows cost the relay 25-35 % less, 2026-12-07).
_SAVE = """
insert into submission_rows (id, team_id, user_id, user_name, status, project, title, priority, cores, memory_gb,
                             preemptible, progress, tasks, avg_frame, created_at, row, time_sum, time_n, last_change)
select r.id, r.team_id, r.user_id, coalesce(u.name, ''), r.status, r.project, r.title, r.priority, r.cores,
       r.memory_gb, r.preemptible, r.progress, r.tasks, r.avg_frame, r.created_at, r.row, r.time_sum, r.time_n,
       r.last_change
from json_to_recordset($1::json)
     as r (id bigint, team_id bigint, user_id bigint, status text, project text, title text, priority int, cores int,
           memory_gb int, preemptible boolean, progress real, tasks int, avg_frame real, created_at timestamptz,
           row text, time_sum double precision, time_n int, last_change timestamptz)
left join users u on u.id = r.user_id
where exists (select 1 from submissions s where s.id = r.id)
on conflict (id) do update set
    team_id = excluded.team_id, user_id = excluded.user_id, user_name = excluded.user_name,
    status = excluded.status, project = excluded.project, title = excluded.title, priority = excluded.priority,
    cores = excluded.cores, memory_gb = excluded.memory_gb, preemptible = excluded.preemptible,
    progress = excluded.progress, tasks = excluded.tasks, avg_frame = excluded.avg_frame,
    created_at = excluded.created_at, row = excluded.row, time_sum = excluded.time_sum, time_n = excluded.time_n,
    last_change = excluded.last_change
"""


SAVE_PART = 10_000  # rows a statement saves: a start that saves a million rows does so in parts


class _Saved(msgspec.Struct):
    """A row as the save statement reads it from its JSON (the columns of `_SAVE`'s record)."""

    id: int
    team_id: int
    user_id: int | None
    status: str
    project: str
    title: str
    priority: int
    cores: int
    memory_gb: int
    preemptible: bool
    progress: float
    tasks: int
    avg_frame: float | None
    created_at: datetime | None
    row: str
    time_sum: float
    time_n: int
    last_change: datetime | None


_encode_saved = msgspec.json.Encoder().encode


async def save(db: asyncpg.Connection, rows: Sequence[SavedRow]) -> None:
    """Save rows (team, row, the row's JSON, its running totals), SAVE_PART a statement; a submission deleted
    meanwhile is skipped."""
    # One row per submission, the last taken: a statement may not change a row twice.
    latest = {s.row.id: s for s in rows}
    ordered = [latest[i] for i in sorted(latest)]  # rows locked in id order, as every writer here does
    for first in range(0, len(ordered), SAVE_PART):
        await _save_part(db, ordered[first : first + SAVE_PART])


async def _save_part(db: asyncpg.Connection, ordered: Sequence[SavedRow]) -> None:
    saved = [_saved(s) for s in ordered]
    await db.execute(_SAVE, _encode_saved(saved).decode())


def _saved(s: SavedRow) -> _Saved:
    r = s.row
    progress = r.counts.completed / r.tasks if r.tasks else 0.0
    return _Saved(
        r.id,
        s.team_id,
        r.user_id,
        r.status,
        r.project,
        r.title,
        r.priority,
        r.cores,
        r.memory_gb,
        r.preemptible,
        progress,
        r.tasks,
        r.avg_frame,
        r.created_at,
        s.json.decode(),
        s.time_sum,
        s.time_n,
        s.last_change,
    )


# A start's submissions, each with its tasks' totals and its saved row's digest (MD5 of the JSON; null: none saved
# with its running totals), of one partition's teams, by id: read a part at a time (a cursor), so the relay never
# holds more than a part besides what it keeps.
_LOAD = """
with per_status as (
    select submission_id, job_listed_status(status, silent_since) as status, count(*) as n,
           coalesce(sum(extract(epoch from finished_at - started_at)) filter (
               where status = 'completed' and started_at is not null and finished_at is not null), 0)::float8
               as time_sum,
           count(*) filter (where status = 'completed' and started_at is not null and finished_at is not null)
               as time_n,
           max(updated_at) as last_change
    from jobs where removed_at is null and submission_id is not null
    group by 1, 2
), per_submission as (
    select submission_id, array_agg(status) as statuses, array_agg(n) as ns, sum(time_sum)::float8 as time_sum,
           sum(time_n)::bigint as time_n, max(last_change) as last_change
    from per_status group by 1
)
select to_jsonb(s)::text as record, t.statuses, t.ns, t.time_sum, t.time_n, t.last_change,
       decode(md5(r.row), 'hex') as digest
from submissions s
left join per_submission t on t.submission_id = s.id
left join submission_rows r on r.id = s.id and r.time_n is not null
where s.team_id % $1 = $2
order by s.id
"""
_record_decoder = msgspec.json.Decoder(SubmissionRecord)


async def load(
    db: asyncpg.Connection, partitions: int, partition: int, part: int = 10_000
) -> AsyncIterator[list[tuple[SubmissionAggregate, bytes | None]]]:
    """One partition's submissions as of the transaction's snapshot (it must be open), oldest first, `part` at a
    time: each aggregate with its saved row's digest (None: not saved with its running totals)."""
    loaded: list[tuple[SubmissionAggregate, bytes | None]] = []
    async for r in db.cursor(_LOAD, partitions, partition, prefetch=part):
        agg = SubmissionAggregate(_record_decoder.decode(r["record"]))
        if r["statuses"] is not None:
            for status, n in zip(r["statuses"], r["ns"], strict=True):
                agg.counts.add(status, n)
            agg.time_sum, agg.time_n, agg.last_change = r["time_sum"], r["time_n"], r["last_change"]
        loaded.append((agg, r["digest"]))
        if len(loaded) >= part:
            yield loaded
            loaded = []
    if loaded:
        yield loaded


async def restore(db: asyncpg.Connection, ids: Sequence[int]) -> list[Restored]:
    """The saved rows of these submissions with their running totals, for the relay to fold on from (those saved
    with them: every row the relay set aside was)."""
    rows = await db.fetch(
        "select team_id, row, time_sum, time_n, last_change from submission_rows"
        " where id = any($1::bigint[]) and time_n is not null",
        list(ids),
    )
    return [Restored(r["team_id"], r["row"], r["time_sum"], r["time_n"], r["last_change"]) for r in rows]


def _where(team_id: int, window: Window) -> tuple[str, list[object]]:
    clauses: list[str] = ["team_id = $1"]
    args: list[object] = [team_id]

    def arg(value: object) -> str:
        args.append(value)
        return f"${len(args)}"

    if window.statuses:
        clauses.append(f"status = any({arg(list(window.statuses))}::text[])")
    if window.projects:
        clauses.append(f"project = any({arg(list(window.projects))}::text[])")
    if window.users:
        clauses.append(f"user_id = any({arg(list(window.users))}::bigint[])")
    if window.search:  # the row's words (its column `words`, sql/025)
        query = words_query(window.search)
        found = f"words @@ to_tsquery('simple', {arg(query)})" if query is not None else "false"
        if window.search_id is not None:
            found += f" or id = {arg(window.search_id)}"
        clauses.append(f"({found})")
    return " and ".join(clauses), args


def _order(window: Window) -> str:
    direction = "desc" if window.descending else "asc"
    return f"order by {window.column} {direction}, id {direction}"  # a column of SORT_COLUMNS: never user text


# A window's total is counted exactly up to EXACT_TO matching rows; past it, counting would read every matching row
# (a million in a team: seconds), so the total is PostgreSQL's estimate of the same statement, said as one.
EXACT_TO = 100_000


# A search matching at most FEW rows reads them all through its index and sorts them. PostgreSQL cannot know how
# few match a search of several words (it guesses thousands for `shot 50000`, which matches ten in a million), and
# would walk the sort's index until a page of them turned up, every row of the team for a rare one (seconds); the
# count, read first, knows. Past FEW, matches are dense enough that walking the sort's index finds a page soon.
FEW = 5_000


def window_statements(team_id: int, window: Window, total: int | None = None) -> tuple[str, str, list[object]]:
    """The count and the page statement `window` runs with `total` matching rows (as the count found them), and
    their arguments (bench.views EXPLAINs the same)."""
    where, args = _where(team_id, window)
    return _count(where), _page(where, window, total), args


def window_filter(team_id: int, window: Window) -> tuple[str, list[object]]:
    """The WHERE clause of a window's statements and its arguments (bench.views counts over it both ways)."""
    return _where(team_id, window)


def estimate_statement(where: str) -> str:
    """What a total past EXACT_TO is read from: PostgreSQL's plan of the same filters."""
    return f"explain (format json) select 1 from submission_rows where {where}"


def _count(where: str) -> str:
    return f"select count(*) from (select 1 from submission_rows where {where} limit {EXACT_TO + 1}) s"


def _page(where: str, window: Window, total: int | None) -> str:
    rows, source = f"from submission_rows where {where}", ""
    if window.search and total is not None and total <= FEW:
        rows, source = "from found", f"with found as materialized (select * from submission_rows where {where}) "
    return f"{source}select row {rows} {_order(window)} limit {int(window.limit)} offset {int(window.offset)}"


async def _total(db: asyncpg.Connection, where: str, args: list[object]) -> tuple[int, bool]:
    """The rows matching `where`, and whether that is exact: counted to EXACT_TO + 1 at most, the planner's
    estimate past it (never less than EXACT_TO + 1)."""
    counted: int = await db.fetchval(_count(where), *args)
    if counted <= EXACT_TO:
        return counted, True
    plan = await db.fetchval(estimate_statement(where), *args)
    estimate = int(json.loads(plan)[0]["Plan"]["Plan Rows"])
    return max(estimate, EXACT_TO + 1), False


async def window(pool: asyncpg.Pool, team_id: int, window: Window, timeout: float) -> tuple[int, bool, list[str]]:
    """The total matching the window's filters, whether it is exact (see EXACT_TO), and the rows (JSON) of its
    page, each statement bounded by `timeout` (reads.TooSlow past it)."""
    where, args = _where(team_id, window)
    async with bounded(pool, timeout, isolation="repeatable_read") as db:
        total, exact = await _total(db, where, args)
        rows = await db.fetch(_page(where, window, total), *args)
    return total, exact, [r["row"] for r in rows]


# Sort columns that may hold NULL: ascending they come last, descending first (PostgreSQL's order, the page's too).
_NULLABLE = frozenset({"avg_frame", "created_at"})


async def export(
    pool: asyncpg.Pool, team_id: int, window: Window, timeout: float, page: int = 500
) -> AsyncIterator[list[str]]:
    """Every row matching the window's filters, in its order (JSON), in keyset pages: each page its own short
    read, no connection held between pages (docs/protocol.md, "The export's consistency")."""
    where, args = _where(team_id, window)
    column, descending = window.column, window.descending
    # Rows whose sort value is NULL are read by id in a part of their own, where the page's order puts them.
    parts = ["values"] if column not in _NULLABLE else ["nulls", "values"] if descending else ["values", "nulls"]
    direction, beyond = ("desc", "<") if descending else ("asc", ">")
    for part in parts:
        after: tuple[object, int] | None = None
        while True:
            extra = list(args)
            if part == "values":
                clause = f"{column} is not null"
                if after is not None:
                    extra += after
                    clause += f" and ({column}, id) {beyond} (${len(extra) - 1}, ${len(extra)})"
                order = f"order by {column} {direction}, id {direction}"
            else:
                clause = f"{column} is null"
                if after is not None:
                    extra.append(after[1])
                    clause += f" and id {beyond} ${len(extra)}"
                order = f"order by id {direction}"
            async with bounded(pool, timeout) as db:
                rows = await db.fetch(
                    f"select {column} as key, id, row from submission_rows where {where} and {clause} {order}"
                    f" limit {int(page)}",
                    *extra,
                )
            if rows:
                yield [r["row"] for r in rows]
            if len(rows) < page:
                break
            after = (rows[-1]["key"], rows[-1]["id"])


async def projects(pool: asyncpg.Pool, team_id: int, timeout: float, limit: int = 1_000) -> list[str]:
    """The team's projects (for the filter), in order."""
    async with bounded(pool, timeout) as db:
        rows = await db.fetch(
            "select distinct project from submission_rows where team_id = $1 and project <> ''"
            " order by project limit $2",
            team_id,
            limit,
        )
    return [r["project"] for r in rows]
