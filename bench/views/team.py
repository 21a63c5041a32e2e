"""The measured team, filled as the platform fills one: N submissions and analysis tasks on some, the tasks the
streaming phase flips, trajectories with their jobs, each written in plain SQL batches; then the waits until the
relay saved every row and the team's channel lists every trajectory, so that what is measured is all there."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import asyncpg
import httpx

from .common import BATCH, PROJECTS, STREAM_RUNNING, STREAM_SUBMISSIONS, STREAM_TASKS_EACH, TRAJECTORY_JOBS_BATCH, USERS

TITLES = [
    "Copper grain",
    "Ocean swell",
    "City at night",
    "Forest fog",
    "Desert wind",
    "Glass atrium",
    "Harbour crane",
    "Rain on tin",
    "Snow field",
    "Turbine hall",
    "Volcano rim",
]
# Plain SQL, as the platform writes: users, projects, titles, priorities, sizes and staging spread over the rows;
# one in 50 submitted by a cluster (no user), created a second apart up to now.
INSERT_SUBMISSIONS = """
insert into submissions (team_id, user_id, project, title, priority, cores, memory_gb, preemptible, staging,
                         instance_type, created_at)
select $1,
       case when i % 50 = 0 then null else ($2::bigint[])[1 + (i * 7) % cardinality($2::bigint[])] end,
       'project-' || lpad(((i * 13) % $5)::text, 2, '0'),
       ($6::text[])[1 + i % cardinality($6::text[])] || ' shot ' || lpad(i::text, 6, '0'),
       (i * 37) % 100,
       (array[2, 4, 8, 16, 32])[1 + i % 5],
       (array[8, 16, 32, 64, 128])[1 + (i / 5) % 5],
       i % 3 = 0,
       case when i % 97 = 0 then 'uploading' when i % 89 = 0 then 'sync_failed' when i % 83 = 0 then 'syncing'
            else 'ready' end,
       case when i % 3 = 0 then 'spot' else 'standard' end,
       now() - ($7 - i) * interval '1 second'
from generate_series($3::int, $4::int) i
"""
# Analysis tasks on every `every`-th submission, 1 to 7 each, in one of six mixes (all done, one running, all
# queued, one failed, half queued, held with one preempted), the finished ones taking 1 to 120 s.
INSERT_JOBS = """
insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status, started_at)
select $1, $2, $3, 'analysis', 'Analysis frame', f, s.id, st.status,
       case when st.status in ('completed', 'failed') then now() - (1 + (s.n * 31 + f * 17) % 120) * interval '1 second' end
from (select id, id - $7 as n from submissions where team_id = $1 and id >= $4 and id <= $5) s
cross join lateral generate_series(0, (s.n % 7)::int) f
cross join lateral (select case (s.n / $6) % 6
    when 0 then 'completed'
    when 1 then case when f = 0 then 'running' else 'completed' end
    when 2 then 'queued'
    when 3 then case when f = 0 then 'failed' else 'completed' end
    when 4 then case when f % 2 = 0 then 'completed' else 'queued' end
    else case when f = 0 then 'preempted' else 'holding' end end as status) st
where s.n % $6 = 0
"""
# Trajectories a minute apart up to now, named "<title> run 0001" and on.
INSERT_TRAJECTORIES = """
insert into trajectories (team_id, name, created_at)
select $1, ($2::text[])[1 + i % cardinality($2::text[])] || ' run ' || lpad(i::text, 4, '0'),
       now() - ($3 - i) * interval '1 minute'
from generate_series(1, $3::int) i
returning id
"""
# Every job belongs to a submission (one named by none is derived, one per trajectory): each trajectory's jobs are
# one of the N submissions (the oldest ready ones without tasks), its pipeline run.
LINK_TRAJECTORIES = """
update submissions s set trajectory_id = t.id
from unnest($2::bigint[], $3::bigint[]) t(id, submission)
where s.id = t.submission and s.team_id = $1
"""
# `per` jobs on each trajectory, in one of five mixes: all done, a quarter running, all queued, a tenth failed,
# half done and half queued.
INSERT_TRAJECTORY_JOBS = """
insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, timestep, status, submission_id)
select $1, t.id, $2, 'analysis', 'Common Neighbor Analysis', f, f * 0.5,
       case t.id % 5
           when 0 then 'completed'
           when 1 then case when f % 4 = 0 then 'running' else 'completed' end
           when 2 then 'queued'
           when 3 then case when f % 10 = 0 then 'failed' else 'completed' end
           else case when f < $4 / 2 then 'completed' else 'queued' end end,
       t.submission
from unnest($3::bigint[], $5::bigint[]) t(id, submission)
cross join generate_series(0, $4 - 1) f
"""
INSERT_STREAM_TASKS = """
insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status)
select $1, $2, $3, 'analysis', 'Analysis frame', t.frame, t.submission, t.status
from unnest($4::bigint[], $5::int[], $6::text[]) t(submission, frame, status)
returning id, status
"""


@dataclass
class Team:
    id: int
    user_ids: list[int]
    token: str
    submissions: int
    jobs: int  # tasks of submissions (the streamed ones' and the trajectories' included)
    trajectory_id: int = 0  # the trajectory every task of a submission belongs to
    cluster_id: int = 0
    stream_submissions: list[int] = field(default_factory=list)
    stream_running: list[int] = field(default_factory=list)  # the streamed tasks running now
    stream_completed: list[int] = field(default_factory=list)  # and completed now
    first_id: int = 0  # the team's first submission: those at (id - first_id) % every == 0 hold analysis tasks
    every: int = 1
    trajectories: int = 0  # in the team, the one holding the tasks included
    trajectory_jobs: int = 0  # jobs on the trajectories added
    all_jobs: int = 0  # every job of the team


async def populate(pool: asyncpg.Pool, secret: str, n: int, say: Callable[[str], None]) -> Team:
    """A team with USERS members, N submissions and analysis tasks on some, saved by the relay."""
    from harness.teams import make_team  # a team, its member, a cluster, a trajectory, a token

    team = await make_team(pool, secret)
    others = await pool.fetch(
        "insert into users (name) select 'artist ' || lpad(i::text, 2, '0') from generate_series(2, $1) i returning id",
        USERS,
    )
    user_ids = [team.user_id, *(r["id"] for r in others)]
    await pool.execute("insert into memberships select $1, unnest($2::bigint[])", team.id, user_ids[1:])
    started = time.monotonic()
    for low in range(1, n + 1, BATCH):
        await pool.execute(INSERT_SUBMISSIONS, team.id, user_ids, low, min(n, low + BATCH - 1), PROJECTS, TITLES, n)
    say(f"{n:,} submissions written in {time.monotonic() - started:.1f} s")
    every = max(20, math.ceil(n / 5_000))  # about 20,000 tasks at 100,000 submissions, never many more
    low, high = await pool.fetchrow("select min(id), max(id) from submissions where team_id = $1", team.id)
    jobs = 0
    for first in range(low, high + 1, BATCH * 5):
        done = await pool.execute(
            INSERT_JOBS, team.id, team.trajectory_id, team.cluster_id, first, first + BATCH * 5 - 1, every, low
        )
        jobs += int(done.split()[-1])
    say(f"{jobs:,} tasks written on every {every}th submission")
    out = Team(team.id, user_ids, team.token, n, jobs, team.trajectory_id, team.cluster_id, first_id=low, every=every)
    await stream_tasks(pool, out, say)
    return out


async def without_tasks(pool: asyncpg.Pool, team: Team, count: int, newest: bool) -> list[int]:
    """The newest (or oldest) `count` ready submissions holding no task yet, by INSERT_JOBS's rule and the streamed
    ones' ids (not an anti-join with jobs: on tables never analyzed, as with autovacuum off, the planner reads it as
    a nested loop over every job, minutes at 100,000 submissions)."""
    rows = await pool.fetch(
        "select id from submissions where team_id = $1 and staging = 'ready' and trajectory_id is null"
        " and (id - $2) % $3 <> 0 and id <> all($4::bigint[])"
        f" order by id {'desc' if newest else 'asc'} limit $5",
        team.id,
        team.first_id,
        team.every,
        team.stream_submissions,
        count,
    )
    return [r["id"] for r in rows]


async def stream_tasks(pool: asyncpg.Pool, team: Team, say: Callable[[str], None]) -> None:
    """STREAM_TASKS_EACH tasks on each of the newest ready submissions without tasks, STREAM_RUNNING of them
    running (chosen at random, the same every run), the rest completed: the rows the streaming phase moves."""
    count = min(STREAM_SUBMISSIONS, team.submissions // 10)
    ids = await without_tasks(pool, team, count, newest=True)
    slots = [(sid, frame) for sid in ids for frame in range(STREAM_TASKS_EACH)]
    running = set(random.Random(1).sample(range(len(slots)), round(len(slots) * STREAM_RUNNING)))
    rows = await pool.fetch(
        INSERT_STREAM_TASKS,
        team.id,
        team.trajectory_id,
        team.cluster_id,
        [sid for sid, _ in slots],
        [frame for _, frame in slots],
        ["running" if i in running else "completed" for i in range(len(slots))],
    )
    team.stream_submissions = ids
    team.stream_running = [r["id"] for r in rows if r["status"] == "running"]
    team.stream_completed = [r["id"] for r in rows if r["status"] == "completed"]
    team.jobs += len(rows)
    say(f"{len(rows):,} tasks to stream into, on the {len(ids)} newest submissions without tasks")


async def populate_trajectories(
    pool: asyncpg.Pool, team: Team, count: int, per: int, say: Callable[[str], None]
) -> list[int]:
    """`count` trajectories in the team, `per` jobs each (mixed statuses) in batches, each trajectory's jobs one of
    the team's submissions (the oldest ready ones without tasks); their ids."""
    started = time.monotonic()
    ids = [r["id"] for r in await pool.fetch(INSERT_TRAJECTORIES, team.id, TITLES, count)]
    runs = await without_tasks(pool, team, count, newest=False)
    if len(runs) < count:
        raise SystemExit(f"bench.views: {count:,} trajectories need as many submissions without tasks ({len(runs):,})")
    await pool.execute(LINK_TRAJECTORIES, team.id, ids, runs)
    step = max(1, TRAJECTORY_JOBS_BATCH // per)
    for low in range(0, len(ids), step):
        await pool.execute(
            INSERT_TRAJECTORY_JOBS, team.id, team.cluster_id, ids[low : low + step], per, runs[low : low + step]
        )
    team.trajectories = 1 + count
    team.trajectory_jobs = count * per
    team.jobs += count * per
    team.all_jobs = await pool.fetchval("select count(*) from jobs where team_id = $1 and removed_at is null", team.id)
    say(f"{count:,} trajectories with {per:,} jobs each written in {time.monotonic() - started:.1f} s")
    return ids


async def wait_saved(pool: asyncpg.Pool, team: Team, say: Callable[[str], None], timeout: float) -> float:
    """Until the relay saved every row with every task counted; the seconds it took."""
    started = time.monotonic()
    last = -1
    while True:
        rows, tasks = await pool.fetchrow(
            "select count(*), coalesce(sum(tasks), 0) from submission_rows where team_id = $1", team.id
        )
        if rows == team.submissions and tasks == team.jobs:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise SystemExit(f"bench.views: the relay saved {rows:,} of {team.submissions:,} rows in {timeout:.0f} s")
        if rows // 10_000 != last // 10_000:
            say(f"relay saved {rows:,} rows, {tasks:,} tasks counted")
        last = rows
        await asyncio.sleep(0.5)


async def wait_listed(base: str, team: Team, say: Callable[[str], None], timeout: float) -> float:
    """Until the team's channel lists every trajectory with every job counted (the relay folded them all); the
    seconds it took."""
    started = time.monotonic()
    headers = {"Authorization": f"Bearer {team.token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        while True:
            listed, jobs, offset = 0, 0, 0
            while True:
                response = await client.get(
                    f"/api/teams/{team.id}/trajectories/active", params={"offset": offset, "limit": 500}
                )
                if response.status_code != 200:
                    break
                body = response.json()
                listed = body["total"]
                jobs += sum(s["total"] for s in body["summaries"])
                offset += len(body["summaries"])
                if not body["summaries"] or offset >= listed:
                    break
            if listed == team.trajectories and jobs == team.all_jobs:
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise SystemExit(
                    f"bench.views: the team lists {listed:,} of {team.trajectories:,} trajectories with {jobs:,} of"
                    f" {team.all_jobs:,} jobs after {timeout:.0f} s"
                )
            await asyncio.sleep(1.0)
