"""`steady`: changes at a fixed rate across many channels; CPU per delta, latency, and every state checked."""

from __future__ import annotations

from typing import Any

import asyncpg
from redis.asyncio import Redis

from ..load import Writer, build_world, database_state, team_counts, team_state
from ..measure import Outcome, Plan, measure
from ..subscribers import Fleet
from ..systems import COMPRESSED, DB_FED, PEER_NAMES, SYSTEMS, Context
from .common import Progress, Run, count_pairs, finish, median_round, turns


async def steady(
    ctx: Context, pool: asyncpg.Pool, redis: Redis, quick: bool, only: list[str], progress: Progress, rounds: int = 1
) -> Run:
    """Many teams, every subscriber on its team's channel and a quarter also on a trajectory panel, thousands of
    job changes a second spread over the teams.

    The gateway's team channel carries the team's counts and summaries, coalesced to at most 4 a second; the
    peers' team rooms carry every change (what their users would build). So that both are counted alike, a
    delivered delta here is one committed change brought to one subscriber that follows it: a peer's frame
    brings one, a gateway batch or summary brings all the changes it reflects. The gateway's team subscribers
    must end at the database's counts, its panels at the trajectory's jobs; a peer's subscribers at every job
    changed while they were connected, and its team rooms also at the database's counts (each message carries
    the team's counts after its transaction, as the gateway's team channel does).
    """
    teams, per_team, jobs = (5, 2, 50) if quick else (50, 4, 100)
    size = 100 if quick else 4_000
    rate, seconds = (40.0, 3.0) if quick else (400.0, 10.0)  # commits a second, of 5 changes each
    world = await build_world(pool, teams=teams, trajectories_per_team=per_team, jobs_per_trajectory=jobs)

    def team_of(i: int) -> int:
        return world.teams[i % teams]

    def channels(i: int) -> list[str]:
        team = team_of(i)
        mine = [f"team:{team}"]
        if i % 4 == 0:
            mine.append(f"trajectory:{world.trajectories[team][(i // teams) % per_team]}")
        return mine

    trajectories = [t for team in world.teams for t in world.trajectories[team]]
    names = [n for n in ["gateway", COMPRESSED[0], *PEER_NAMES, *DB_FED] if not only or n in only]
    run = Run(
        {
            "scenario": "steady",
            "quick": quick,
            "teams": teams,
            "subscribers": size,
            "commits_per_s": rate,
            "seconds": seconds,
        }
    )
    systems: dict[str, dict[str, Any]] = {}
    plan = Plan(size, channels, team_of)
    followers: dict[str, int] = {}
    for i in range(size):
        for channel in channels(i):
            followers[channel] = followers.get(channel, 0) + 1
    measured: dict[str, list[Outcome]] = {}
    for turn, name in turns(names, rounds):
        writer = Writer(pool, redis, world, per_tx=5, concurrency=4, tap_team_channel=True)

        async def workload(fleet: Fleet, writer: Writer = writer) -> None:
            await writer.run(rate, seconds, trajectories)

        async def expected(gateway: bool, writer: Writer = writer) -> dict[str, dict[Any, Any]]:
            want: dict[str, dict[Any, Any]] = {}
            for team in world.teams:
                if gateway:
                    want[f"team:{team}"] = await team_counts(pool, team)
                else:
                    want[f"team:{team}"] = await team_state(pool, team, writer.changed)
                for trajectory in world.trajectories[team]:
                    want[f"trajectory:{trajectory}"] = await database_state(
                        pool, trajectory, None if gateway else writer.changed
                    )
            return {c: v for c, v in want.items() if c in followers}

        progress(
            f"steady: {name}, {size:,} subscribers over {teams} teams, {rate:.0f} commits/s of 5 changes for {seconds:.0f} s"
            + (f" (round {turn + 1} of {rounds})" if rounds > 1 else "")
        )
        outcome = await measure(
            SYSTEMS[name], ctx, plan, lambda team: world.token(ctx.secret, team), workload, expected, progress
        )
        figures = outcome.figures
        # (change, subscriber) pairs: every change reaches its team's followers and its trajectory's.
        per_change = {
            t: followers.get(f"team:{world.team_of[t]}", 0) + followers.get(f"trajectory:{t}", 0) for t in trajectories
        }
        delivered = (
            writer.changes * sum(per_change.values()) / len(per_change) if figures["correct"] else figures["deltas"]
        )
        figures["changes"] = writer.changes
        figures["late_commits"] = writer.late  # the writer fell behind its rate (broadcaster-pg's trigger slows it)
        count_pairs(figures, delivered)
        measured.setdefault(name, []).append(outcome)
    for name, outcomes in measured.items():
        median = median_round(outcomes, "cpu_us_per_delta")
        systems[name] = median.figures
        run.curves[name] = median.curve
    return finish(
        run, systems, f"steady, {size:,} subscribers over {teams} teams, {rate * 5:,.0f} job changes a second"
    )
