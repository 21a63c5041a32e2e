"""The gateway's reads: who may see what, trajectory names, and paged snapshots of job channels."""

from __future__ import annotations

import asyncpg
import msgspec

from ..core.aggregate import TrajectoryAggregate
from ..core.channels import Channel
from ..core.grouping import Group, group_order, key_for, make_group
from ..core.model import Counts, Job, TrajectorySummary
from .types import Database

_jobs_decoder = msgspec.json.Decoder(list[Job])


async def team_of_channel(pool: asyncpg.Pool, channel: Channel) -> int | None:
    """The team whose members may subscribe to a channel, or None when it does not exist."""
    if channel.kind == "trajectory":
        return await pool.fetchval("select team_id from trajectories where id = $1", channel.id)
    return await pool.fetchval("select id from teams where id = $1", channel.id)


# A row's team, answered only to one of its members. Another team's row and a missing one both answer None through
# the same single query: neither the answer nor its time tells whether another team's id exists.
async def members_team_of_trajectory(pool: asyncpg.Pool, trajectory_id: int, user_id: int) -> int | None:
    return await pool.fetchval(
        "select t.team_id from trajectories t join memberships m on m.team_id = t.team_id"
        " where t.id = $1 and m.user_id = $2",
        trajectory_id,
        user_id,
    )


async def members_team_of_analysis(pool: asyncpg.Pool, analysis_id: int, user_id: int) -> int | None:
    return await pool.fetchval(
        "select t.team_id from analyses a join trajectories t on t.id = a.trajectory_id"
        " join memberships m on m.team_id = t.team_id where a.id = $1 and m.user_id = $2",
        analysis_id,
        user_id,
    )


async def is_member(pool: asyncpg.Pool, user_id: int, team_id: int) -> bool:
    return bool(await pool.fetchval("select 1 from memberships where user_id = $1 and team_id = $2", user_id, team_id))


async def user_exists(db: Database, user_id: int) -> bool:
    return bool(await db.fetchval("select 1 from users where id = $1", user_id))


async def jobs_page(pool: asyncpg.Pool, channel: Channel, after_id: int, limit: int) -> list[Job]:
    """One page of a job channel's listed jobs, by id, decoded straight from PostgreSQL's JSON."""
    column = "trajectory_id" if channel.kind == "trajectory" else "team_id"
    text = await pool.fetchval(
        f"select coalesce(json_agg(j order by j.id), '[]')::text from ("
        f" select * from jobs where {column} = $1 and removed_at is null and id > $2 order by id limit $3) j",
        channel.id,
        after_id,
        limit,
    )
    return _jobs_decoder.decode(text)


# Every trajectory's counts per status; the relay's startup snapshot and a team's fallback state.
AGGREGATES = """
select t.id, t.team_id, t.name,
       count(*) filter (where j.listed = 'queued') as queued,
       count(*) filter (where j.listed = 'retrying') as retrying,
       count(*) filter (where j.listed = 'running') as running,
       count(*) filter (where j.listed = 'completed') as completed,
       count(*) filter (where j.listed = 'failed') as failed,
       count(*) filter (where j.listed = 'holding') as holding,
       count(*) filter (where j.listed = 'preempted') as preempted,
       count(*) filter (where j.listed = 'silent') as silent,
       max(j.updated_at) as updated_at
from trajectories t
left join (select trajectory_id, updated_at, job_listed_status(status, silent_since) as listed from jobs
           where removed_at is null) j on j.trajectory_id = t.id
where $1::bigint is null or t.team_id = $1
group by t.id
"""


def aggregate_of(row: asyncpg.Record) -> TrajectoryAggregate:
    return TrajectoryAggregate(
        id=row["id"],
        team_id=row["team_id"],
        name=row["name"],
        counts=Counts(
            row["queued"],
            row["retrying"],
            row["running"],
            row["completed"],
            row["failed"],
            row["holding"],
            row["preempted"],
            row["silent"],
        ),
        updated_at=row["updated_at"],
    )


async def team_state(pool: asyncpg.Pool, team_id: int) -> tuple[Counts, list[TrajectorySummary]]:
    """A team's counts and summaries straight from PostgreSQL (when the bus has lost them)."""
    counts = Counts()
    summaries = []
    for row in await pool.fetch(AGGREGATES, team_id):
        agg = aggregate_of(row)
        for status, n in agg.counts.as_dict().items():
            counts.add(status, n)
        if agg.counts.total():
            summaries.append(agg.summary())
    return counts, summaries


# Listed jobs per frame group and status; the group key itself is computed in Python (core.grouping).
GROUP_COUNTS = """
select trajectory_id, kind in ('trajectory_transfer', 'analysis_transfer', 'storage_transfer') as transfer,
       frame, job_listed_status(status, silent_since) as status, count(*) as n, max(timestep) as timestep
from jobs
where removed_at is null and ($1::bigint is null or trajectory_id = $1)
group by 1, 2, 3, 4
"""


def add_group_counts(trajectories: dict[int, TrajectoryAggregate], rows: list[asyncpg.Record]) -> None:
    for r in rows:
        agg = trajectories.get(r["trajectory_id"])
        if agg is not None:
            agg.count_group(key_for(r["transfer"], r["frame"]), r["status"], r["n"], r["timestep"])


async def trajectory_groups(pool: asyncpg.Pool, trajectory_id: int) -> list[Group]:
    agg = TrajectoryAggregate(id=trajectory_id, team_id=0, name="")
    add_group_counts({trajectory_id: agg}, await pool.fetch(GROUP_COUNTS, trajectory_id))
    return [
        make_group(key, g.counts, g.timestep)
        for key, g in sorted(agg.groups.items(), key=lambda kv: group_order(kv[0]))
    ]
