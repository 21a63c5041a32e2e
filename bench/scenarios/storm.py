"""`storm`: every subscriber dropped at once and reconnecting; how soon each system is current again."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from redis.asyncio import Redis

from ..healthz import HealthProbe, lag_figures, latency_figures, node_histograms, pause_figures
from ..load import Writer, build_world, database_state, mix_statuses
from ..measure import Plan, measure
from ..subscribers import Fleet
from ..systems import PEER_NAMES, SYSTEMS, Context
from .common import Progress, Run, finish

STORM_SIZE = 4_000  # storm's clients unless told (`--sizes 16000`)


async def storm(
    ctx: Context,
    pool: asyncpg.Pool,
    redis: Redis,
    quick: bool,
    only: list[str],
    progress: Progress,
    sizes: list[int] | None = None,
) -> Run:
    """C clients drop at once and reconnect at once while jobs keep changing: how long until all are current.

    Gateway subscribers come back with their cursors and get exactly what they missed (no resync while the
    history holds it); the node admits new connections at GATEWAY_ADMISSION_RATE (default 2,000 a second)
    and tells the rest to come back after a jittered delay. Peers' clients just reconnect and join again,
    and get the channel's state again. `sizes`: the number of clients, the largest given (STORM_SIZE by
    default, 200 with `quick`).
    """
    size = max(sizes) if sizes else 200 if quick else STORM_SIZE
    world = await build_world(pool, teams=1, trajectories_per_team=1, jobs_per_trajectory=200)
    team = world.teams[0]
    trajectory = world.trajectories[team][0]
    channel = f"trajectory:{trajectory}"
    await mix_statuses(pool, trajectory)  # its state about as many bytes for every system, the first too
    names = [n for n in ["gateway", *PEER_NAMES] if not only or n in only]
    run = Run({"scenario": "storm", "quick": quick, "channel": channel, "subscribers": size})
    systems: dict[str, dict[str, Any]] = {}
    plan = Plan(size, lambda i: [channel], lambda i: team, connect_rate=1000.0, peer_state=True)
    for name in names:
        writer = Writer(pool, redis, world, per_tx=5, concurrency=2)
        await writer.share_state([trajectory])  # what the peers send each subscriber as it connects, and reconnects

        async def workload(fleet: Fleet, writer: Writer = writer) -> dict[str, Any]:
            load = asyncio.create_task(writer.run(2, 60, [trajectory]))  # changes keep coming during the storm
            # The node must stay responsive while it admits the storm: its /healthz, polled throughout.
            probe = HealthProbe(fleet.http_base) if fleet.http_base and fleet.dialect.startswith("gateway") else None
            before = await asyncio.to_thread(node_histograms, fleet.http_base) if probe and fleet.http_base else None
            try:
                await asyncio.sleep(1.0)
                result = await fleet.storm(timeout=120)
                await asyncio.sleep(1.0)
            finally:
                load.cancel()
                await asyncio.gather(load, return_exceptions=True)
                samples = await probe.stop() if probe is not None else None
            figures = {
                "recovery_s": result.get("recovery_s"),
                "http_503": result.get("http_503", 0),
                "storm_resyncs": result.get("resyncs", 0),
                "storm_connects": result.get("connects", 0),
            }
            if samples is not None:
                # From the drop until a second after the last subscriber was live again (the run's settling).
                dropped, recovered = result["dropped_at"], result["dropped_at"] + (result.get("recovery_s") or 120)
                figures["healthz"] = latency_figures(samples, dropped, recovered + 1.0)
                figures["healthz"]["failures"] = probe.failures if probe is not None else {}
            if before is not None and fleet.http_base:
                after = await asyncio.to_thread(node_histograms, fleet.http_base)
                figures["loop_lag"] = lag_figures(before, after)
                figures["gc"] = pause_figures(before, after)
            return figures

        async def expected(gateway: bool) -> dict[str, dict[int, tuple[int, str]]]:
            return {channel: await database_state(pool, trajectory)}  # every system sent the state at connect

        progress(f"storm C={size:,}: {name}")
        outcome = await measure(
            SYSTEMS[name], ctx, plan, lambda team: world.token(ctx.secret, team), workload, expected, progress
        )
        systems[name] = outcome.figures
        run.curves[name] = outcome.curve
        progress(
            f"{name}: all {size:,} current again {outcome.figures.get('recovery_s')} s after the drop, "
            f"{outcome.figures.get('http_503')} told to retry, {outcome.figures.get('storm_resyncs')} resyncs"
        )
    lines = [
        "",
        "| system | current again after (s) | told to retry (503) | resyncs | lost | stale "
        "| /healthz from the drop to a second after: p50, p99, peak (ms); unanswered "
        "| its event loop: 50 ms timers, 99 % late by under (ms), late by over 100 ms "
        "| its collector's passes by generation 0/1/2; over 50 ms; the longest under (ms) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, f in systems.items():
        recovery = f"{f['recovery_s']:.2f}" if f.get("recovery_s") is not None else "not within 120 s"
        h = f.get("healthz")
        health = f"{h['p50_ms']}, {h['p99_ms']}, {h['peak_ms']}; {h['failed']} of {h['polls']}" if h else "-"
        lag = f.get("loop_lag")
        loop = f"{lag['ticks']}, {lag['p99_under_ms']}, {lag['over_100ms']}" if lag else "-"
        gc = f.get("gc")
        passes = (
            "-"
            if not gc
            else "; ".join(
                [
                    "/".join(str(gc[g]["passes"]) for g in "012"),
                    "/".join(str(gc[g]["over_50ms"]) for g in "012"),
                    "/".join(str(gc[g]["longest_under_ms"]) for g in "012"),
                ]
            )
        )
        lines.append(
            f"| {name} | {recovery} | {f.get('http_503')} | {f.get('storm_resyncs')} | {f['lost']} | {f['stale']} "
            f"| {health} | {loop} | {passes} |"
        )
    return finish(run, systems, f"storm, C = {size:,} clients dropped and reconnected at once", lines)
