"""The workload: jobs in PostgreSQL, changed at a fixed rate, and the one tap every peer is fed by.

Each transaction updates a few jobs of one trajectory (a cluster reporting progress) and returns their whole
rows. The gateway follows the database itself (trigger, outbox, relay); the peers get the same committed
changes from the tap, which publishes each transaction's changes to Redis as `bench:<channel>`: every
changed job's whole state, encoded as the gateway's wire encodes it (gateway.core.model.Job: the same fields,
defaults left out, about 200 bytes), so every system carries the same information. Its `updated_at` (the
statement's time: the commit is a millisecond later) is the stamp latency starts from, for every system.

A team room's message also carries the team's counts per status after the transaction, as the gateway's team
channel does, and a trajectory's message the groups its jobs changed (each frame group's counts and colour),
as the gateway's trajectory batches do: without them the peers' frames were about 0.6 of the gateway's bytes
for the same information. The writer keeps both itself from each change's old and new
status (exact: it is the only writer during a run, and it knows the status each change left), numbered per
channel: its connections publish concurrently, so a subscriber keeps the counts with the highest `seq`.
Querying them instead would cost a scan of the team's jobs per transaction (40,000 rows in `burst`) in the
writer every system shares.

Where subscribers connect while it runs (`fanout`, `storm`: `Writer.share_state`), the tap also keeps each
trajectory's current state in Redis, under the tap channel's own name (`GET bench:trajectory:17`): one message
with every listed job and every group (`state: true`), what the gateway's snapshot of the channel carries and
about as many bytes. It is SET before the transaction's changes are published, and the writer's connections
do both in the order it computed them, so a peer that reads it after its subscriber joined the channel's
room has every change the room will not bring. A peer sends it to each new subscriber first, read once for all
who arrive before the channel's next message (bench/peers/state.py, bench/peers/node/state.js).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import asyncpg
import msgspec
from redis.asyncio import Redis

from gateway.core.aggregate import TrajectoryAggregate
from gateway.core.grouping import Group, group_order, job_group
from gateway.core.model import Job
from gateway.core.status import LISTED
from gateway.store.queries import trajectory_groups
from gateway.web.people.auth import issue_token

from . import sql
from .subscribers.jobstate import counts_state

NEXT_STATUS = {"queued": "running", "running": "completed", "completed": "queued"}  # a cycle that never ends
PREVIOUS_STATUS: dict[str, str | None] = {new: old for old, new in NEXT_STATUS.items()}


@dataclass
class World:
    """Teams with one member each, a cluster each, trajectories with their jobs."""

    teams: list[int]
    users: dict[int, int]  # team -> its member
    trajectories: dict[int, list[int]]  # team -> trajectories
    jobs: dict[int, list[int]]  # trajectory -> job ids
    team_of: dict[int, int] = field(default_factory=dict)  # trajectory -> team

    def token(self, secret: str, team: int) -> str:
        return issue_token(secret, self.users[team], ttl=24 * 3600)


async def build_world(pool: asyncpg.Pool, teams: int, trajectories_per_team: int, jobs_per_trajectory: int) -> World:
    world = World([], {}, {}, {})
    async with pool.acquire() as db:
        for t in range(teams):
            team = await db.fetchval(sql.NEW_TEAM, f"Bench team {t}")
            user = await db.fetchval(sql.NEW_USER, f"Bench user {t}")
            await db.execute(sql.NEW_MEMBERSHIP, team, user)
            cluster = await db.fetchval(sql.NEW_CLUSTER, team)
            world.teams.append(team)
            world.users[team] = user
            world.trajectories[team] = []
            for i in range(trajectories_per_team):
                trajectory = await db.fetchval(sql.NEW_TRAJECTORY, team, f"Trajectory {t}.{i}")
                world.trajectories[team].append(trajectory)
                world.team_of[trajectory] = team
                rows = await db.fetch(
                    sql.NEW_JOBS,
                    team,
                    trajectory,
                    cluster,
                    jobs_per_trajectory,
                )
                world.jobs[trajectory] = [r["id"] for r in rows]
    return world


class TapMessage(msgspec.Struct, omit_defaults=True):
    """One transaction's changes on one channel, as the peers forward them."""

    channel: str
    changes: list[Job]  # each job's whole state, encoded as the gateway's wire encodes it
    counts: dict[str, int] | None = None  # a team room: the team's counts per status after the transaction
    groups: list[Group] | None = None  # a trajectory: the groups these changes moved, after the transaction
    seq: int | None = None  # the channel's messages' order, for counts and groups (they are published concurrently)
    state: bool = False  # the channel's whole state (every listed job, every group): what a peer sends at connect


_encode = msgspec.json.Encoder().encode
_decode_job = msgspec.json.Decoder(Job).decode


@dataclass
class Writer:
    """Commits `rate` transactions a second of `per_tx` job changes each, over `concurrency` connections."""

    pool: asyncpg.Pool
    redis: Redis | None  # None: no tap (only the gateway is fed; `bench faults` restarts Redis under it)
    world: World
    per_tx: int = 5
    concurrency: int = 4
    tap_team_channel: bool = False  # peers' team rooms also get every change (steady)
    tolerate_errors: bool = False  # a transaction that fails (PostgreSQL restarting) is skipped, not fatal
    failed: int = 0  # transactions that failed and were skipped (tolerate_errors)
    committed: int = 0  # transactions
    changes: int = 0
    changed: set[int] = field(default_factory=set)  # job ids changed since `changed` was last cleared
    late: int = 0  # transactions that started behind their schedule (the writer could not keep the rate)
    counts: dict[int, dict[str, int]] = field(default_factory=dict)  # team -> its counts (tap_team_channel)
    groups: dict[int, TrajectoryAggregate] = field(default_factory=dict)  # trajectory -> its groups' counts
    seqs: dict[str, int] = field(default_factory=dict)  # channel -> its last message's number
    # The trajectories whose state is kept in Redis (share_state): their listed jobs and groups, in order.
    state_jobs: dict[int, dict[int, Job]] = field(default_factory=dict)
    state_groups: dict[int, dict[str, Group]] = field(default_factory=dict)
    _in_order: asyncio.Lock = field(default_factory=asyncio.Lock)  # a state and its changes, as they were computed

    async def run(self, rate: float, seconds: float, trajectories: Iterable[int]) -> None:
        trajectories = list(trajectories)
        await self._load_counts({self.world.team_of[t] for t in trajectories})
        await self._load_groups(trajectories)
        picks = itertools.cycle(trajectories)
        queue: asyncio.Queue[int | None] = asyncio.Queue(maxsize=self.concurrency * 4)
        workers = [asyncio.create_task(self._work(queue)) for _ in range(self.concurrency)]
        start = time.monotonic()
        try:
            for i in range(int(rate * seconds)):
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                elif delay < -0.1:
                    self.late += 1
                await _put(queue, next(picks), workers)
            for _ in workers:
                await _put(queue, None, workers)
            await asyncio.gather(*workers)
        finally:  # stopped early (cancelled): the workers stop too
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)

    async def upload(
        self, trajectory: int, frames: int, stages: list[tuple[str, int | None]], chunk: int = 500
    ) -> None:
        """A burst, as a cluster reports one: `frames` jobs of each kind created queued, then moved through
        running to completed, `chunk` jobs a transaction, kind after kind (an upload's preprocessing, then
        each analysis of the pipeline)."""
        team = self.world.team_of[trajectory]
        await self._load_counts({team})
        await self._load_groups([trajectory])
        cluster = await self.pool.fetchval(sql.TEAM_CLUSTER, team)
        for kind, analysis in stages:
            ids: list[int] = []
            for start in range(0, frames, chunk):
                rows = await self.pool.fetch(
                    sql.UPLOAD_JOBS,
                    team,
                    trajectory,
                    cluster,
                    kind,
                    kind.capitalize(),
                    start,
                    min(frames, start + chunk) - 1,
                    analysis,
                )
                ids += [r["id"] for r in rows]
                await self._tapped(trajectory, rows, {"queued": None})
            for status, was in (("running", "queued"), ("completed", "running")):
                for start in range(0, len(ids), chunk):
                    rows = await self.pool.fetch(
                        sql.UPLOAD_STATUS,
                        ids[start : start + chunk],
                        status,
                    )
                    await self._tapped(trajectory, rows, {status: was})

    async def _load_counts(self, teams: set[int]) -> None:
        """The teams' counts before the first change: the writer keeps them from there (team rooms only)."""
        if self.redis is None or not self.tap_team_channel:
            return
        for team in teams - self.counts.keys():
            self.counts[team] = await team_counts(self.pool, team)

    async def _load_groups(self, trajectories: Iterable[int]) -> None:
        """The trajectories' groups before the first change, as a snapshot reads them: kept from there."""
        if self.redis is None:
            return
        for trajectory in set(trajectories) - self.groups.keys():
            agg = self.groups[trajectory] = TrajectoryAggregate(id=trajectory, team_id=0, name="")
            for group in await trajectory_groups(self.pool, trajectory):
                for status, n in group.counts.as_dict().items():
                    if n:
                        agg.count_group(group.key, status, n, group.timestep)

    async def share_state(self, trajectories: Iterable[int]) -> None:
        """Keep these trajectories' states in Redis from now on, each under its tap channel's name, starting with
        their jobs and groups as a snapshot reads them. Before their subscribers connect: what a peer sends each."""
        if self.redis is None:
            return
        await self._load_groups(trajectories)
        for trajectory in set(trajectories) - self.state_jobs.keys():
            rows = await self.pool.fetch(sql.TRAJECTORY_ROWS, trajectory)
            self.state_jobs[trajectory] = {job.id: job for job in (_decode_job(r["job"]) for r in rows)}
            agg = self.groups[trajectory]
            self.state_groups[trajectory] = {key: agg.group(key) for key in sorted(agg.groups, key=group_order)}
            channel = f"trajectory:{trajectory}"
            await self.redis.set(f"bench:{channel}", self._state(trajectory, channel))

    def _state(self, trajectory: int, channel: str) -> bytes:
        jobs, groups = self.state_jobs[trajectory], self.state_groups[trajectory]
        seq = self.seqs.get(channel)  # the last change it holds
        return _encode(TapMessage(channel, list(jobs.values()), groups=list(groups.values()), seq=seq, state=True))

    def _keep_state(self, trajectory: int, jobs: list[Job], groups: list[Group]) -> None:
        """A transaction's changes in the kept state of its trajectory (removed jobs and empty groups leave it).
        The highest version of a job wins: of two transactions on the same job, the later one's rows can come
        back to the writer first."""
        kept_jobs, kept_groups = self.state_jobs[trajectory], self.state_groups[trajectory]
        for job in jobs:
            old = kept_jobs.get(job.id)
            if old is not None and old.version >= job.version:
                continue
            if job.removed_at is None:
                kept_jobs[job.id] = job
            else:
                kept_jobs.pop(job.id, None)
        fresh = False
        for group in groups:
            if not group.total:
                kept_groups.pop(group.key, None)
            else:
                fresh = fresh or group.key not in kept_groups
                kept_groups[group.key] = group
        if fresh:  # a new group: in the snapshot's order again
            self.state_groups[trajectory] = dict(sorted(kept_groups.items(), key=lambda kv: group_order(kv[0])))

    def _next_seq(self, channel: str) -> int:
        seq = self.seqs[channel] = self.seqs.get(channel, 0) + 1
        return seq

    async def _tapped(self, trajectory: int, rows: list[asyncpg.Record], was: Mapping[str, str | None]) -> None:
        """Count a committed transaction's changes and publish them to the peers. `was` maps each new status
        to the one its jobs left (None: new jobs)."""
        self.committed += 1
        self.changes += len(rows)
        self.changed.update(r["id"] for r in rows)
        if self.redis is None:
            return
        jobs = [_decode_job(r["job"]) for r in rows]
        channel = f"trajectory:{trajectory}"
        # Counts and groups are computed and numbered with no await in between: the highest number has every
        # change.
        message = TapMessage(
            channel, jobs, groups=self._moved_groups(trajectory, jobs, was), seq=self._next_seq(channel)
        )
        team_message = None
        if self.tap_team_channel:
            team = self.world.team_of[trajectory]
            counts = self.counts[team]
            for job in jobs:
                old = was[job.status]
                if old is not None:
                    counts[old] -= 1
                counts[job.status] += 1
            team_channel = f"team:{team}"
            team_message = TapMessage(team_channel, jobs, dict(counts), seq=self._next_seq(team_channel))
        if trajectory in self.state_jobs:
            assert message.groups is not None
            self._keep_state(trajectory, jobs, message.groups)
            state = self._state(trajectory, channel)
            # Taken in the order computed (no await since): each state is SET before its changes are published,
            # and a later state never before an earlier one.
            async with self._in_order:
                async with self.redis.pipeline(transaction=False) as pipe:
                    pipe.set(f"bench:{channel}", state)
                    pipe.publish(f"bench:{channel}", _encode(message))
                    await pipe.execute()
        else:
            await self.redis.publish(f"bench:{channel}", _encode(message))
        if team_message is not None:
            await self.redis.publish(f"bench:{team_message.channel}", _encode(team_message))

    def _moved_groups(self, trajectory: int, jobs: list[Job], was: Mapping[str, str | None]) -> list[Group]:
        """The groups these changes moved, with their counts after them (as the gateway's batch carries them)."""
        agg = self.groups[trajectory]
        keys = set()
        for job in jobs:
            key = job_group(job)
            keys.add(key)
            # The new status counted before the old one is taken off: a transaction's rows can come back after
            # a later one's on the same job, and a group whose counts pass through a total of 0 is dropped.
            agg.count_group(key, job.status, 1, job.timestep)
            old = was[job.status]
            if old is not None:
                agg.count_group(key, old, -1)
        return [agg.group(key) for key in sorted(keys, key=group_order)]

    async def _work(self, queue: asyncio.Queue[int | None]) -> None:
        while (trajectory := await queue.get()) is not None:
            try:
                await self.change(trajectory)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError):
                if not self.tolerate_errors:
                    raise
                self.failed += 1
                await asyncio.sleep(0.05)  # the database is away: do not spin

    async def change(self, trajectory: int) -> None:
        ids = random.sample(self.world.jobs[trajectory], min(self.per_tx, len(self.world.jobs[trajectory])))
        rows = await self.pool.fetch(sql.NEXT_STATUSES, ids)
        # Its jobs only ever hold the three statuses of NEXT_STATUS: the new status tells the old one.
        await self._tapped(trajectory, rows, PREVIOUS_STATUS)


async def _put(queue: asyncio.Queue[int | None], item: int | None, workers: list[asyncio.Task[None]]) -> None:
    """Queue an item for the workers; if they have all died (an error the writer does not tolerate), raise it
    rather than wait for ever on a full queue."""
    if not queue.full():
        queue.put_nowait(item)
        return
    put = asyncio.ensure_future(queue.put(item))
    while not put.done():
        await asyncio.wait([put, *[w for w in workers if not w.done()]], return_when=asyncio.FIRST_COMPLETED)
        if not put.done() and all(w.done() for w in workers):
            put.cancel()
            for worker in workers:
                worker.result()  # the error that ended it
            raise RuntimeError("the writer's workers all ended")


STATUSES = LISTED  # every status a count carries (silent included)


async def team_counts(pool: asyncpg.Pool, team: int) -> dict[str, int]:
    """A team's counts per status of its listed jobs, as the team channel carries them."""
    rows = await pool.fetch(sql.TEAM_COUNTS, team)
    counts = dict.fromkeys(STATUSES, 0)
    counts.update({r["status"]: r["n"] for r in rows})
    return counts


async def team_state(pool: asyncpg.Pool, team: int, only: set[int]) -> dict[int, tuple[int, str]]:
    """What a peer's team room should have brought its subscribers: the team's jobs among `only`, and its
    counts (held beside the jobs as bench.subscribers.jobstate.counts_state keeps them)."""
    rows = await pool.fetch(sql.TEAM_JOBS_AMONG, team, list(only))
    return {r["id"]: (r["version"], r["status"]) for r in rows} | counts_state(await team_counts(pool, team))


async def mix_statuses(pool: asyncpg.Pool, trajectory: int) -> None:
    """A fresh trajectory's jobs (all queued) moved into the mix of statuses the writer keeps them in, a third
    each, through the cycle it moves them along: a running job then carries its `started_at`, a completed one
    its `finished_at` too, as after a system's run. Before the first system: the channel's state (a snapshot, a
    peer's state at connect) is then about as many bytes for every system, not the fewest for the first."""
    for status, remainders in (("running", [1, 2]), ("completed", [2])):
        await pool.execute(sql.MIX_STATUSES, trajectory, status, remainders)


async def database_state(
    pool: asyncpg.Pool, trajectory: int, only: set[int] | None = None
) -> dict[int, tuple[int, str]]:
    """A trajectory's listed jobs as subscribers should hold them: id -> (version, status)."""
    rows = await pool.fetch(sql.TRAJECTORY_JOBS, trajectory)
    return {r["id"]: (r["version"], r["status"]) for r in rows if only is None or r["id"] in only}
