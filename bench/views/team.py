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

from ..sql import (
    INSERT_JOBS,
    INSERT_STREAM_TASKS,
    INSERT_SUBMISSIONS,
    INSERT_TRAJECTORIES,
    INSERT_TRAJECTORY_JOBS,
    LINK_TRAJECTORIES,
    NEW_ARTISTS,
    NEW_MEMBERSHIPS,
    SAVED_ROWS,
    SUBMISSION_IDS,
    TEAM_JOB_COUNT,
    submissions_without_tasks,
)
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
    others = await pool.fetch(NEW_ARTISTS, USERS)
    user_ids = [team.user_id, *(r["id"] for r in others)]
    await pool.execute(NEW_MEMBERSHIPS, team.id, user_ids[1:])
    started = time.monotonic()
    for low in range(1, n + 1, BATCH):
        await pool.execute(INSERT_SUBMISSIONS, team.id, user_ids, low, min(n, low + BATCH - 1), PROJECTS, TITLES, n)
    say(f"{n:,} submissions written in {time.monotonic() - started:.1f} s")
    every = max(20, math.ceil(n / 5_000))  # about 20,000 tasks at 100,000 submissions, never many more
    low, high = await pool.fetchrow(SUBMISSION_IDS, team.id)
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
        submissions_without_tasks(newest),
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
    team.all_jobs = await pool.fetchval(TEAM_JOB_COUNT, team.id)
    say(f"{count:,} trajectories with {per:,} jobs each written in {time.monotonic() - started:.1f} s")
    return ids


async def wait_saved(pool: asyncpg.Pool, team: Team, say: Callable[[str], None], timeout: float) -> float:
    """Until the relay saved every row with every task counted; the seconds it took."""
    started = time.monotonic()
    last = -1
    while True:
        rows, tasks = await pool.fetchrow(SAVED_ROWS, team.id)
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
