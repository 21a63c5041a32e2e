"""What a relay cycle costs in Python, without I/O: `steady`'s or `burst`'s shape replayed through the relay's own
code.

    python -m bench.relay_core [--shape steady|burst] [--cycles 3000] [--profile]

`steady`: 50 teams of 4 trajectories of 100 jobs; each cycle (`steady`'s 400 commits a second read every 10 ms,
the busy poll when this bench was written and the shape its figures in docs/performance.md are for) reads 4
transactions of 5 changes. `burst`: one trajectory of 10,000 frames with 4 jobs each (`burst`'s upload and
three analyses); each cycle (its 50 ms tick) reads one transaction of 500 of them moving on, one after another.
Each reads the transactions as the outbox returns them (each job as PostgreSQL's `to_jsonb` text), folds them
into the batcher, takes what is due on its own clock, and packs the cycle's publish as redis-py would send it.
What it leaves out is what the machine's services do: the outbox query, the round trips, Redis running the script.

The same work every run (a fixed seed, a simulated clock) and no other process in the measure, so the best of
several runs moves less than `steady`'s CPU figures; on a shared machine single runs still spread widely, so
compare trees by the best of runs taken in turns. Reported: µs per cycle and per change (the best of `--repeat`
runs), and with `--profile` the functions that take the time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from redis.asyncio import Redis
from redis.asyncio.connection import Connection

from gateway.bus.packing import one_join
from gateway.bus.publisher import Publisher
from gateway.core.aggregate import TrajectoryAggregate
from gateway.core.batching import Batcher
from gateway.core.work_snapshot import WaitingWork, WorkSnapshot
from gateway.store.outbox import OutboxReader


@dataclass(frozen=True)
class Shape:
    teams: int
    trajectories: int  # per team
    jobs: int  # per trajectory
    frames: int  # a trajectory's jobs are on this many frames, in turn
    commits: int  # a cycle
    changes: int  # a commit
    poll: float  # seconds a cycle
    spread: bool  # each commit's jobs drawn at random from one trajectory (steady), or the next ones in turn (burst)


SHAPES = {
    "steady": Shape(teams=50, trajectories=4, jobs=100, frames=100, commits=4, changes=5, poll=0.010, spread=True),
    "burst": Shape(
        teams=1, trajectories=1, jobs=40_000, frames=10_000, commits=1, changes=500, poll=0.050, spread=False
    ),
}
NEXT = {"queued": "running", "running": "completed", "completed": "queued"}


class _Bus:
    """What `Publisher` asks of a bus to build its calls: a client to register its scripts with."""

    cluster = False

    def __init__(self) -> None:
        self.redis = Redis()  # never connected: registering a script only computes its hash


class World:
    """The jobs as PostgreSQL holds them, changed as `steady`'s writer changes them."""

    def __init__(self, shape: Shape, seed: int) -> None:
        self.shape = shape
        self.random = random.Random(seed)
        self.clock = datetime(2026, 1, 1, tzinfo=UTC)
        self.jobs: dict[int, dict[str, Any]] = {}
        self.by_trajectory: dict[int, list[int]] = {}
        self.xid = 1000
        self.seq = 0
        self.next = 0  # burst: where the next commit's jobs start
        job_id = 1
        for team in range(1, shape.teams + 1):
            for t in range(shape.trajectories):
                trajectory = team * 10 + t
                self.by_trajectory[trajectory] = []
                for j in range(shape.jobs):
                    self.jobs[job_id] = _row(job_id, team, trajectory, j % shape.frames, self.clock)
                    self.by_trajectory[trajectory].append(job_id)
                    job_id += 1

    def aggregates(self) -> list[TrajectoryAggregate]:
        out = []
        for trajectory, ids in self.by_trajectory.items():
            agg = TrajectoryAggregate(id=trajectory, team_id=trajectory // 10, name=f"Trajectory {trajectory}")
            for job_id in ids:
                agg.counts.add("queued", 1)
                agg.count_group(f"frame:{self.jobs[job_id]['frame']}", "queued", 1)
            out.append(agg)
        return out

    def work(self) -> WorkSnapshot:
        """Every job queued, per trajectory, as a takeover reads them for the estimates of time left."""
        return WorkSnapshot(
            waiting=[
                WaitingWork(trajectory // 10, "preprocess", trajectory, None, None, "queued", len(ids))
                for trajectory, ids in self.by_trajectory.items()
            ]
        )

    def commit(self, now: datetime) -> list[dict[str, Any]]:
        """One transaction: jobs of one trajectory move on; its outbox rows."""
        self.xid += 1
        trajectory = self.random.choice(list(self.by_trajectory))
        ids, n = self.by_trajectory[trajectory], self.shape.changes
        if self.shape.spread:
            moving = self.random.sample(ids, n)
        else:
            moving = [ids[(self.next + k) % len(ids)] for k in range(n)]
            self.next += n
        rows = []
        for job_id in moving:
            job = self.jobs[job_id]
            old = job["status"]
            job["status"], job["version"], job["updated_at"] = NEXT[old], job["version"] + 1, now.isoformat()
            # As the table's trigger stamps them: the estimates of time left read them.
            if job["status"] == "running":
                job["started_at"], job["finished_at"] = now.isoformat(), None
            elif job["status"] == "completed":
                job["finished_at"] = now.isoformat()
            else:
                job["started_at"] = job["finished_at"] = None
            self.seq += 1
            rows.append(
                {
                    "horizon": self.xid + 1,
                    "xid": self.xid,
                    "seq": self.seq,
                    "entity": "job",
                    "old_status": old,
                    "new_status": job["status"],
                    "job": _encode(job).decode(),
                    "counted": False,
                    "held_back": False,
                }
            )
        return rows


_encode = msgspec.json.Encoder().encode


def _row(job_id: int, team: int, trajectory: int, frame: int, at: datetime) -> dict[str, Any]:
    """A job's row as `to_jsonb(jobs)` gives it: every column, nulls included."""
    return {
        "id": job_id,
        "team_id": team,
        "trajectory_id": trajectory,
        "cluster_id": team,
        "kind": "preprocess",
        "name": f"Preprocess frame {frame}",
        "status": "queued",
        "version": 1,
        "attempts": 1,
        "analysis_id": None,
        "submission_id": None,
        "frame": frame,
        "timestep": None,
        "error": None,
        "created_at": at.isoformat(),
        "updated_at": at.isoformat(),
        "started_at": None,
        "finished_at": None,
        "removed_at": None,
        "priority": 0,
        "instance_type": None,
    }


def run(shape: Shape, cycles: int, seed: int = 1) -> tuple[float, int, int]:
    """Seconds of Python for `cycles` cycles, the changes folded in and the messages published."""
    world = World(shape, seed)
    core = Batcher(epoch=1)
    core.load(world.aggregates())
    core.load_work(world.work())
    reader = OutboxReader(None, 0, 1)  # only `take` is used: no connection
    publisher = Publisher(_Bus(), "{p0}", 1, 1000, 3600)  # type: ignore[arg-type]
    packer = one_join(Connection)()  # the bus's connection class, never connected: only its packing is used
    # The outbox's rows, made before the clock starts: only the relay's own work is timed.
    reads = [
        [row for _ in range(shape.commits) for row in world.commit(world.clock + timedelta(seconds=i * shape.poll))]
        for i in range(cycles)
    ]
    changes = published = 0
    now = 1000.0
    wall = world.clock.timestamp() - now  # the jobs' clock at `now`
    started = time.perf_counter()
    for rows in reads:
        now += shape.poll
        result = reader.take(rows, 5000)
        core.apply(result.changes, now)
        changes += len(result.changes)
        missing = core.channels_without_seq()
        if missing:
            core.set_seqs(dict.fromkeys(missing, 0))
        core.refresh_eta(now, wall + now)
        publications = core.take_job_publications(now) + core.take_team_publications(now)
        for call in publisher.calls(publications, reader.position, wall + now):
            packer.pack_command(*call)
        published += len(publications)
    seconds = time.perf_counter() - started
    check(world, core)
    return seconds, changes, published


def check(world: World, core: Batcher) -> None:
    """The batcher's counts are the jobs' statuses: a faster cycle that counts wrong is no result."""
    for team_id, team in core.aggregates.teams.items():
        expected: dict[str, int] = {}
        for job in world.jobs.values():
            if job["team_id"] == team_id:
                expected[job["status"]] = expected.get(job["status"], 0) + 1
        got = {status: n for status, n in team.counts.as_dict().items() if n}
        if got != expected:
            raise AssertionError(f"team {team_id}: the relay counts {got}, the jobs are {expected}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="steady")
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5, help="runs; the best is reported")
    parser.add_argument("--profile", action="store_true", help="one run under cProfile: the top functions")
    args = parser.parse_args()
    shape = SHAPES[args.shape]
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(run, shape, args.cycles)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
        return
    best = min((run(shape, args.cycles) for _ in range(args.repeat)), key=lambda r: r[0])
    seconds, changes, published = best
    print(
        f"{args.cycles} cycles, {changes} changes, {published} messages ({published / args.cycles:.1f} a cycle):"
        f" {seconds / args.cycles * 1e6:.1f} µs a cycle,"
        f" {seconds / changes * 1e6:.2f} µs a change (best of {args.repeat})"
    )


if __name__ == "__main__":
    main()
