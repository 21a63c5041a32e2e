"""`burst`: one big transaction after another on one trajectory, slow subscribers among the fast."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import asyncpg
from redis.asyncio import Redis

from .. import sql
from ..load import Writer, build_world, database_state, team_counts, team_state
from ..measure import Outcome, Plan, measure
from ..subscribers import Fleet
from ..systems import COMPRESSED, DB_FED, PEER_NAMES, SYSTEMS, Context
from .common import Progress, Run, count_pairs, finish, median_round, published, turns


async def burst(
    ctx: Context, pool: asyncpg.Pool, redis: Redis, quick: bool, only: list[str], progress: Progress, rounds: int = 1
) -> Run:
    """A 10,000-frame upload and a three-analysis pipeline run on it: 40,000 jobs created and moved through
    queued, running and completed in seconds (500 jobs a transaction), 500 subscribers on the team's channel,
    100 on the trajectory's. The gateway coalesces (a job's latest state per batch, batches growing with the
    load up to a 50 ms tick); what it must show is far fewer frames than changes on the trajectory channel,
    with every subscriber ending exactly at the database's state. Each system's upload is its team's only one,
    so that the team is the same size for every system (broadcaster-pg's trigger counts it at every change).
    With `rounds`, the systems take turns that many times, each round a fresh upload, and each system's median
    round is reported: a burst's cost is mostly copying bytes, which a busy spell of the machine moves most."""
    frames, team_subs, panel_subs = (500, 40, 10) if quick else (10_000, 500, 100)
    size = team_subs + panel_subs
    names = [n for n in ["gateway", COMPRESSED[0], *PEER_NAMES, *DB_FED] if not only or n in only]
    run = Run({"scenario": "burst", "quick": quick, "frames": frames, "subscribers": size})
    systems: dict[str, dict[str, Any]] = {}
    measured: dict[str, list[Outcome]] = {}
    for n, (turn, name) in enumerate(turns(names, rounds)):
        world = await build_world(pool, teams=1, trajectories_per_team=0, jobs_per_trajectory=0)
        team = world.teams[0]
        trajectory = await pool.fetchval(sql.NEW_TRAJECTORY, team, f"Upload {n}")
        world.team_of[trajectory] = team
        analyses = [
            await pool.fetchval(sql.NEW_ANALYSIS, trajectory, plugin)
            for plugin in ("rmsd", "radius-of-gyration", "contact-map")
        ]
        stages: list[tuple[str, int | None]] = [("preprocess", None)] + [("analysis", a) for a in analyses]
        channel = f"trajectory:{trajectory}"

        def channels(i: int, channel: str = channel, team: int = team) -> list[str]:
            return [f"team:{team}"] if i < team_subs else [channel]

        def team_of(i: int, team: int = team) -> int:
            return team

        writer = Writer(pool, redis, world, tap_team_channel=True)

        async def workload(
            fleet: Fleet,
            writer: Writer = writer,
            trajectory: int = trajectory,
            channel: str = channel,
            stages: list[tuple[str, int | None]] = stages,
            team: int = team,
        ) -> dict[str, Any]:
            seq_before = await published(redis, channel, team)
            started = asyncio.get_running_loop().time()
            await writer.upload(trajectory, frames, stages)
            took = asyncio.get_running_loop().time() - started
            return {
                "burst_seconds": round(took, 2),
                "gateway_trajectory_frames": await published(redis, channel, team) - seq_before,
            }

        async def expected(
            gateway: bool,
            writer: Writer = writer,
            trajectory: int = trajectory,
            channel: str = channel,
            team: int = team,
        ) -> dict[str, dict[Any, Any]]:
            if gateway:
                return {f"team:{team}": await team_counts(pool, team), channel: await database_state(pool, trajectory)}
            return {
                f"team:{team}": await team_state(pool, team, writer.changed),
                channel: await database_state(pool, trajectory, writer.changed),
            }

        progress(
            f"burst: {name}, {frames:,} frames x {len(stages)} stages, {team_subs} team and {panel_subs} panel subscribers"
            + (f" (round {turn + 1} of {rounds})" if rounds > 1 else "")
        )
        outcome = await measure(
            SYSTEMS[name],
            ctx,
            Plan(size, channels, team_of),
            functools.partial(world.token, ctx.secret),
            workload,
            expected,
            progress,
        )
        figures = outcome.figures
        figures["changes"] = writer.changes
        count_pairs(figures, writer.changes * size if figures["correct"] else figures["deltas"])
        if SYSTEMS[name].dialect == "gateway":
            trajectory_frames = figures.pop("gateway_trajectory_frames")
        else:  # the tap's plain peers forward one frame per transaction; socket.io and broadcaster-pg one per change
            figures.pop("gateway_trajectory_frames")
            trajectory_frames = writer.changes if SYSTEMS[name].per_change else writer.committed
        figures["trajectory_frames"] = trajectory_frames
        figures["changes_per_trajectory_frame"] = (
            round(writer.changes / trajectory_frames, 1) if trajectory_frames else None
        )
        measured.setdefault(name, []).append(outcome)
        progress(
            f"{name}: {writer.changes:,} changes in {figures['burst_seconds']} s, {trajectory_frames:,} frames on the trajectory channel"
        )
    for name, outcomes in measured.items():
        median = median_round(outcomes, "cpu_us_per_delta")
        systems[name] = median.figures
        run.curves[name] = median.curve
    lines = [
        "",
        "| system | job changes | committed in s | frames on the trajectory channel | changes per frame |",
        "|---|---|---|---|---|",
    ]
    for name, f in systems.items():  # committed in: broadcaster-pg's trigger slows the writer down
        lines.append(
            f"| {name} | {f['changes']:,} | {f['burst_seconds']} | {f['trajectory_frames']:,} | "
            f"{f['changes_per_trajectory_frame']} |"
        )
    return finish(run, systems, f"burst, {frames:,}-frame upload and a three-analysis pipeline", lines)
