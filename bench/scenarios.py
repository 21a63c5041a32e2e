"""The scenarios: what load, how many subscribers, which systems, and what the run must show.

Each returns its record (`systems` with one object per system; runs at several sizes under `runs`), the
markdown tables, and a latency curve per system for the plots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from redis.asyncio import Redis

from .load import Writer, World, build_world, database_state
from .measure import Outcome, Plan, measure
from .subscribers import Fleet
from .report import markdown, ratios
from .systems import BASELINES, PEER_NAMES, SYSTEMS, Context

Progress = Callable[[str], None]


@dataclass
class Run:
    record: dict[str, Any]
    tables: list[str] = field(default_factory=list)
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


async def fanout(ctx: Context, pool: asyncpg.Pool, redis: Redis, quick: bool, only: list[str], progress: Progress) -> Run:
    """One channel, C subscribers, a fixed rate of small batches (about 20,000 frames a second in all)."""
    sizes = [100] if quick else [1_000, 4_000]
    seconds = 2.0 if quick else 10.0
    frames_per_s = 2_000 if quick else 20_000
    world = await build_world(pool, teams=1, trajectories_per_team=1, jobs_per_trajectory=200)
    team = world.teams[0]
    trajectory = world.trajectories[team][0]
    channel = f"trajectory:{trajectory}"
    names = [n for n in ["gateway", *BASELINES, *PEER_NAMES] if not only or n in only]
    run = Run({"scenario": "fanout", "quick": quick, "channel": channel, "seconds": seconds, "runs": []})
    for size in sizes:
        rate = frames_per_s / size  # transactions a second, each a batch of 5 job changes: one frame per subscriber
        plan = Plan(size, lambda i: [channel], lambda i: team)
        systems: dict[str, dict[str, Any]] = {}
        for name in names:
            writer = Writer(pool, redis, world, per_tx=5, concurrency=2)

            async def workload(fleet: Fleet, writer: Writer = writer) -> None:
                await writer.run(rate, seconds, [trajectory])

            async def expected(gateway: bool, writer: Writer = writer) -> dict[str, dict[int, tuple[int, str]]]:
                return {channel: await database_state(pool, trajectory, None if gateway else writer.changed)}

            progress(f"fanout C={size:,}: {name}, {rate:.0f} commits/s of 5 changes for {seconds:.0f} s")
            outcome: Outcome = await measure(SYSTEMS[name], ctx, plan, lambda team: world.token(ctx.secret, team), workload, expected, progress)
            outcome.figures.update(commits=writer.committed, changes=writer.changes, late_commits=writer.late)
            systems[name] = outcome.figures
            run.curves[f"{name} C={size}"] = outcome.curve
        peers = [n for n in PEER_NAMES if n in systems]
        run.record["runs"].append({"subscribers": size, "commits_per_s": rate, "systems": systems, "ratios": ratios(systems, peers)})
        run.tables.append(markdown(f"fanout, C = {size:,} subscribers on one channel", systems, peers, _fanout_checks(systems)))
    run.record["systems"] = run.record["runs"][-1]["systems"]
    return run


def _fanout_checks(systems: dict[str, dict[str, Any]]) -> list[str]:
    """The targets of the fanout scenario, as measured in this run."""
    gw, floor, node = systems.get("gateway"), systems.get("floor"), systems.get("node-ws")
    lines: list[str] = []
    if gw and floor and gw.get("cpu_us_per_frame") and floor.get("cpu_us_per_frame"):
        lines.append(f"- gateway CPU per frame: {gw['cpu_us_per_frame'] / floor['cpu_us_per_frame']:.2f} × the raw-write floor (target ≤ 1.15)")
    if gw and node and gw.get("cpu_us_per_frame") and node.get("cpu_us_per_frame"):
        lines.append(f"- gateway CPU per frame: {gw['cpu_us_per_frame'] / node['cpu_us_per_frame']:.2f} × Node ws (target < 1)")
    if gw:
        lines.append(f"- gateway memory per idle connection: {gw['rss_kb_per_conn']:.1f} KB (target ≤ 10)")
    return [""] + lines if lines else []


async def storm(ctx: Context, pool: asyncpg.Pool, redis: Redis, quick: bool, only: list[str], progress: Progress) -> Run:
    """C clients drop at once and reconnect at once while jobs keep changing: how long until all are current.

    Gateway subscribers come back with their cursors and get exactly what they missed (no resync while the
    history holds it); the node admits new connections at GATEWAY_ADMISSION_RATE (default 2,000 a second)
    and tells the rest to come back after a jittered delay. Peers' clients just reconnect and join again.
    """
    size = 200 if quick else 4_000
    world = await build_world(pool, teams=1, trajectories_per_team=1, jobs_per_trajectory=200)
    team = world.teams[0]
    trajectory = world.trajectories[team][0]
    channel = f"trajectory:{trajectory}"
    names = [n for n in ["gateway", *PEER_NAMES] if not only or n in only]
    run = Run({"scenario": "storm", "quick": quick, "channel": channel, "subscribers": size})
    systems: dict[str, dict[str, Any]] = {}
    plan = Plan(size, lambda i: [channel], lambda i: team, connect_rate=1000.0)
    for name in names:
        writer = Writer(pool, redis, world, per_tx=5, concurrency=2)

        async def workload(fleet: Fleet, writer: Writer = writer) -> dict[str, Any]:
            load = asyncio.create_task(writer.run(2, 60, [trajectory]))  # changes keep coming during the storm
            try:
                await asyncio.sleep(1.0)
                result = await fleet.storm(timeout=120)
                await asyncio.sleep(1.0)
            finally:
                load.cancel()
                await asyncio.gather(load, return_exceptions=True)
            return {"recovery_s": result.get("recovery_s"), "http_503": result.get("http_503", 0),
                    "storm_resyncs": result.get("resyncs", 0), "storm_connects": result.get("connects", 0)}  # fmt: skip

        async def expected(gateway: bool, writer: Writer = writer) -> dict[str, dict[int, tuple[int, str]]]:
            return {channel: await database_state(pool, trajectory, None if gateway else writer.changed)}

        progress(f"storm C={size:,}: {name}")
        outcome = await measure(SYSTEMS[name], ctx, plan, lambda team: world.token(ctx.secret, team), workload, expected, progress)
        systems[name] = outcome.figures
        run.curves[name] = outcome.curve
        progress(f"{name}: all {size:,} current again {outcome.figures.get('recovery_s')} s after the drop, "
                 f"{outcome.figures.get('http_503')} told to retry, {outcome.figures.get('storm_resyncs')} resyncs")  # fmt: skip
    peers = [n for n in PEER_NAMES if n in systems]
    run.record["systems"] = systems
    run.record["ratios"] = ratios(systems, peers)
    lines = ["", "| system | current again after (s) | told to retry (503) | resyncs | lost | stale |", "|---|---|---|---|---|---|"]
    for name, f in systems.items():
        recovery = f"{f['recovery_s']:.2f}" if f.get("recovery_s") is not None else "not within 120 s"
        lines.append(f"| {name} | {recovery} | {f.get('http_503')} | {f.get('storm_resyncs')} | {f['lost']} | {f['stale']} |")
    run.tables.append(markdown(f"storm, C = {size:,} clients dropped and reconnected at once", systems, peers, lines))
    return run


SCENARIOS = {"fanout": fanout, "storm": storm}
