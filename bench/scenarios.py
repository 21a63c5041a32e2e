"""The scenarios: what load, how many subscribers, which systems, and what the run must show.

Each returns its record (`systems` with one object per system; runs at several sizes under `runs`), the
markdown tables, and a latency curve per system for the plots.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from redis.asyncio import Redis

from gateway.bus import history, keys

from . import sql
from .healthz import HealthProbe, lag_buckets, lag_figures, latency_figures
from .load import World, Writer, build_world, database_state, mix_statuses, team_counts, team_state
from .measure import Outcome, Plan, measure, settle
from .report import markdown, ratios
from .subscribers import Fleet
from .systems import BASELINES, COMPRESSED, DB_FED, PEER_NAMES, SYSTEMS, WORKERS, Context

Progress = Callable[[str], None]


@dataclass
class Run:
    record: dict[str, Any]
    tables: list[str] = field(default_factory=list)
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


SATURATION_STEPS = (2, 4, 8, 16, 32)  # commit rates, as multiples of the fixed rate
SATURATION_P99_MS = 500.0  # past this p99 (commit to receipt) a system no longer keeps up, up to 4,000 subscribers
STORM_SIZE = 4_000  # storm's clients unless told (`--sizes 16000`)
FANOUT_SIZES = (1_000, 4_000)  # fanout's subscriber counts unless told (`--sizes 1000,4000,16000`)


def saturation_p99_ms(size: int) -> float:
    """SATURATION_P99_MS, and past 4,000 subscribers in proportion to them: a commit is `size` frames written one
    after another and read by two subscriber processes on the same cores, so the last one's wait grows with C
    even for the raw-write floor (p99 about 1 s at 16,000 at the fixed rate)."""
    return SATURATION_P99_MS * max(1.0, size / 4_000)


async def fanout(
    ctx: Context,
    pool: asyncpg.Pool,
    redis: Redis,
    quick: bool,
    only: list[str],
    progress: Progress,
    rounds: int = 1,
    sizes: list[int] | None = None,
) -> Run:
    """One channel, C subscribers, a fixed rate of small batches (about 20,000 frames a second in all), then
    saturation: the same running system at twice, four times ... the commit rate, a few seconds a step,
    until it no longer keeps up. With `rounds`, every system's fixed rate is measured that many times,
    the systems taking turns, and the median round is reported (saturation runs in the last round).
    `sizes`: the subscriber counts, FANOUT_SIZES by default (100 with `quick`). Every system sends each subscriber
    the channel's state as it connects (the gateway its snapshot, a peer the state the tap keeps), so that what
    connecting costs compares like with like, and every subscriber must end at the database's state."""
    sizes = sizes or ([100] if quick else list(FANOUT_SIZES))
    seconds = 2.0 if quick else 10.0
    frames_per_s = 2_000 if quick else 20_000
    world = await build_world(pool, teams=1, trajectories_per_team=1, jobs_per_trajectory=200)
    team = world.teams[0]
    trajectory = world.trajectories[team][0]
    channel = f"trajectory:{trajectory}"
    await mix_statuses(pool, trajectory)  # its state about as many bytes for every system, the first too
    names = [n for n in ["gateway", COMPRESSED[0], *BASELINES, COMPRESSED[1], *PEER_NAMES] if not only or n in only]
    names += [n for n in WORKERS if n in only]  # only when named: a second gateway run, not a peer
    run = Run({"scenario": "fanout", "quick": quick, "channel": channel, "seconds": seconds, "runs": []})
    for size in sizes:
        rate = frames_per_s / size  # transactions a second, each a batch of 5 job changes: one frame per subscriber
        plan = Plan(size, lambda i: [channel], lambda i: team, peer_state=True)
        systems: dict[str, dict[str, Any]] = {}
        measured: dict[str, list[Outcome]] = {}
        for turn, name in [(turn, name) for turn in range(rounds) for name in names]:
            writer = Writer(pool, redis, world, per_tx=5, concurrency=2)
            await writer.share_state([trajectory])  # what the peers send each subscriber as it connects

            async def workload(fleet: Fleet, writer: Writer = writer) -> None:
                await writer.run(rate, seconds, [trajectory])  # noqa: B023  (called at once, inside the loop)

            async def expected(gateway: bool) -> dict[str, dict[int, tuple[int, str]]]:
                return {channel: await database_state(pool, trajectory)}  # every system sent the state at connect

            async def saturate(
                fleet: Fleet,
                cpu: Callable[[], float],
                figures: dict[str, Any],
                size: int = size,
                rate: float = rate,
                name: str = name,
            ) -> dict[str, Any]:
                if not figures["correct"] or (figures["p99_ms"] or 0) > saturation_p99_ms(size):
                    progress(f"{name}: no saturation steps (it did not keep up with the fixed rate)")
                    return {"saturation_steps": [], "saturation_deliveries_per_s": None}
                return await _saturation(
                    fleet, cpu, pool, redis, world, trajectory, size, rate, quick, lambda m: progress(f"{name}: {m}")
                )

            progress(
                f"fanout C={size:,}: {name}, {rate:.3g} commits/s of 5 changes for {seconds:.0f} s"
                + (f" (round {turn + 1} of {rounds})" if rounds > 1 else "")
            )
            outcome: Outcome = await measure(
                SYSTEMS[name],
                ctx,
                plan,
                lambda team: world.token(ctx.secret, team),
                workload,
                expected,
                progress,
                after=saturate if turn == rounds - 1 else None,
            )
            outcome.figures.update(commits=writer.committed, changes=writer.changes, late_commits=writer.late)
            measured.setdefault(name, []).append(outcome)
        for name, outcomes in measured.items():
            median = median_round(outcomes, "cpu_us_per_frame")
            systems[name] = median.figures
            run.curves[f"{name} C={size}"] = median.curve
        peers = [n for n in PEER_NAMES if n in systems]
        run.record["runs"].append(
            {"subscribers": size, "commits_per_s": rate, "systems": systems, "ratios": ratios(systems, peers)}
        )
        run.tables.append(
            markdown(f"fanout, C = {size:,} subscribers on one channel", systems, peers, _fanout_checks(systems, size))
        )
        run.tables.append(_saturation_table(size, rate, systems))
    run.record["systems"] = run.record["runs"][-1]["systems"]
    return run


async def _saturation(
    fleet: Fleet,
    cpu: Callable[[], float],
    pool: asyncpg.Pool,
    redis: Redis,
    world: World,
    trajectory: int,
    size: int,
    rate: float,
    quick: bool,
    progress: Progress,
) -> dict[str, Any]:
    """Raise the commit rate step by step until the system no longer keeps up: its p99 passes
    saturation_p99_ms(size), or what was committed has not all arrived a second after the step."""
    steps: list[dict[str, Any]] = []
    for multiple in SATURATION_STEPS[:2] if quick else SATURATION_STEPS:
        writer = Writer(pool, redis, world, per_tx=5, concurrency=4)
        await fleet.reset_stats()
        cpu_before, started = cpu(), time.monotonic()
        await writer.run(rate * multiple, 1.0 if quick else 3.0, [trajectory])
        committed_at = time.monotonic()
        await settle(fleet, quiet=0.5, longest=30.0)
        stats = await fleet.stats()
        used, elapsed = cpu() - cpu_before, committed_at - started
        frames, p99 = stats.get("messages", 0), (stats.get("latency_ms") or {}).get("p99")
        drained = time.monotonic() - committed_at - 0.5  # how long the backlog took after the last commit
        writer_limited = (
            writer.late >= writer.committed / 10
        )  # PostgreSQL took no more: the harness's limit, not the system's
        kept_up = p99 is not None and p99 <= saturation_p99_ms(size) and drained < 1.0
        steps.append(
            {
                "commits_per_s": round(writer.committed / elapsed, 1),
                "changes_per_s": round(writer.changes / elapsed, 1),
                "deliveries_per_s": round(writer.changes * size / elapsed),
                "frames_per_s": round(frames / elapsed),
                "p99_ms": p99,
                "cpu_us_per_delivery": round(used * 1e6 / (writer.changes * size), 3) if writer.changes else None,
                "drained_s": round(drained, 2),
                "kept_up": kept_up,
                "writer_limited": writer_limited,
            }
        )
        progress(
            f"saturation x{multiple}: {steps[-1]['changes_per_s']:,.0f} changes/s, {steps[-1]['frames_per_s']:,} frames/s, "
            f"p99 {p99} ms, {'kept up' if kept_up else 'fell behind'}"
        )
        if not kept_up or writer_limited:
            break
    best = max((s for s in steps if s["kept_up"]), key=lambda s: s["deliveries_per_s"], default=None)
    return {"saturation_steps": steps, "saturation_deliveries_per_s": best["deliveries_per_s"] if best else None}


def _saturation_table(size: int, rate: float, systems: dict[str, dict[str, Any]]) -> str:
    """Each system's highest step kept up: job changes a second brought to every subscriber."""
    lines = [
        f"#### saturation, C = {size:,}: the commit rate raised from {rate:.3g} a second (x2, x4, ...) until a system "
        f"no longer keeps up (p99 over {saturation_p99_ms(size):.0f} ms, or a backlog a second after the step)",
        "",
        "| system | most job changes a second kept up | deliveries a second (changes x subscribers) | frames/s there | p99 ms there | CPU µs per delivery there | next step |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, f in systems.items():
        steps = f.get("saturation_steps") or []
        kept = [s for s in steps if s["kept_up"]]
        best = max(kept, key=lambda s: s["deliveries_per_s"]) if kept else None
        failed = next((s for s in steps if not s["kept_up"]), None)
        if failed:
            after = f"fell behind at {failed['changes_per_s']:,.0f} changes/s (p99 {failed['p99_ms']} ms)"
        elif steps and steps[-1]["writer_limited"]:
            after = "kept up with all the writer could commit"
        else:
            after = "kept up (highest step)"
        if best is None:
            lines.append(f"| {name} | none above the fixed rate | – | – | – | – | {after if steps else 'not run'} |")
            continue
        lines.append(
            f"| {name} | {best['changes_per_s']:,.0f} | {best['deliveries_per_s']:,} | {best['frames_per_s']:,} | "
            f"{best['p99_ms']} | {best['cpu_us_per_delivery']} | {after} |"
        )
    return "\n".join(lines) + "\n"


def _fanout_checks(systems: dict[str, dict[str, Any]], size: int) -> list[str]:
    """The targets of the fanout scenario, as measured in this run at `size` subscribers."""
    gw, floor, node = systems.get("gateway"), systems.get("floor"), systems.get("node-ws")
    lines: list[str] = []
    if gw and floor and gw.get("cpu_us_per_frame") and floor.get("cpu_us_per_frame"):
        lines.append(
            f"- gateway CPU per frame: {gw['cpu_us_per_frame'] / floor['cpu_us_per_frame']:.2f} × the raw-write floor (target ≤ 1.15)"
        )
    if gw and node and gw.get("cpu_us_per_frame") and node.get("cpu_us_per_frame"):
        lines.append(
            f"- gateway CPU per frame: {gw['cpu_us_per_frame'] / node['cpu_us_per_frame']:.2f} × Node ws (target < 1)"
        )
    if gw:
        # ≤ 10 KB at 1,000 and 4,000; ≤ 6 KB at 16,000, where the node's fixed memory
        # is spread thinner and what is left is the connection's own.
        target = 6 if size >= 16_000 else 10
        others = ", ".join(f"{n} {systems[n]['rss_kb_per_conn']:.1f} KB" for n in ("floor", "node-ws") if n in systems)
        lines.append(
            f"- gateway memory per idle connection at C = {size:,}: {gw['rss_kb_per_conn']:.1f} KB (target ≤ {target})"
            + (f"; {others}" if others else "")
        )
    lines += _compression_checks(systems)
    return [""] + lines if lines else []


def _compression_checks(systems: dict[str, dict[str, Any]]) -> list[str]:
    """permessage-deflate: the gateway's CPU per frame compressing against not, and against Node ws
    compressing; bytes on the wire per subscriber, connecting (snapshot) and measured (live) together."""
    gw, z, node_z = systems.get("gateway"), systems.get("gateway-deflate"), systems.get("node-ws-deflate")
    lines: list[str] = []
    if gw and z and gw.get("cpu_us_per_frame") and z.get("cpu_us_per_frame"):
        lines.append(
            f"- gateway compressing: CPU per frame {z['cpu_us_per_frame'] / gw['cpu_us_per_frame']:.2f} × uncompressed (target ≤ 1.2)"
        )
    if z and node_z and z.get("cpu_us_per_frame") and node_z.get("cpu_us_per_frame"):
        lines.append(
            f"- gateway compressing: CPU per frame {z['cpu_us_per_frame'] / node_z['cpu_us_per_frame']:.2f} × Node ws compressing (target < 1)"
        )
    if gw and z:
        plain = gw.get("connect_kb_per_sub", 0) + gw.get("kb_per_sub", 0)
        deflated = z.get("connect_kb_per_sub", 0) + z.get("kb_per_sub", 0)
        if plain:
            lines.append(
                f"- gateway compressing: {deflated:.1f} KB on the wire per subscriber against {plain:.1f} KB, "
                f"{deflated / plain:.2f} × (target ≤ 0.25; snapshot {z.get('connect_kb_per_sub')} against "
                f"{gw.get('connect_kb_per_sub')} KB, live {z.get('kb_per_sub')} against {gw.get('kb_per_sub')} KB)"
            )
    return lines


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
            lag_before = await asyncio.to_thread(lag_buckets, fleet.http_base) if probe and fleet.http_base else None
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
            if lag_before is not None and fleet.http_base:
                figures["loop_lag"] = lag_figures(lag_before, await asyncio.to_thread(lag_buckets, fleet.http_base))
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
        "| its event loop: 50 ms timers, 99 % late by under (ms), late by over 100 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, f in systems.items():
        recovery = f"{f['recovery_s']:.2f}" if f.get("recovery_s") is not None else "not within 120 s"
        h = f.get("healthz")
        health = f"{h['p50_ms']}, {h['p99_ms']}, {h['peak_ms']}; {h['failed']} of {h['polls']}" if h else "-"
        lag = f.get("loop_lag")
        loop = f"{lag['ticks']}, {lag['p99_under_ms']}, {lag['over_100ms']}" if lag else "-"
        lines.append(
            f"| {name} | {recovery} | {f.get('http_503')} | {f.get('storm_resyncs')} | {f['lost']} | {f['stale']} "
            f"| {health} | {loop} |"
        )
    return _finish(run, systems, f"storm, C = {size:,} clients dropped and reconnected at once", lines)


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
    for turn, name in [(turn, name) for turn in range(rounds) for name in names]:
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
        _count_pairs(figures, delivered)
        measured.setdefault(name, []).append(outcome)
    for name, outcomes in measured.items():
        median = median_round(outcomes, "cpu_us_per_delta")
        systems[name] = median.figures
        run.curves[name] = median.curve
    return _finish(
        run, systems, f"steady, {size:,} subscribers over {teams} teams, {rate * 5:,.0f} job changes a second"
    )


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
    for n, (turn, name) in enumerate([(turn, name) for turn in range(rounds) for name in names]):
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
            seq_before = await _published(redis, channel, team)
            started = asyncio.get_running_loop().time()
            await writer.upload(trajectory, frames, stages)
            took = asyncio.get_running_loop().time() - started
            return {
                "burst_seconds": round(took, 2),
                "gateway_trajectory_frames": await _published(redis, channel, team) - seq_before,
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
        _count_pairs(figures, writer.changes * size if figures["correct"] else figures["deltas"])
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
    return _finish(run, systems, f"burst, {frames:,}-frame upload and a three-analysis pipeline", lines)


def median_round(outcomes: list[Outcome], key: str) -> Outcome:
    """Of one system's rounds, the one whose `key` is the median (lower median for an even count), whole, so
    its figures agree with each other; with every round's `key`, and correct only if every round was. The
    rounds take turns with the other systems', so a machine that slows down for a while moves every system's
    figures, not one system's."""
    if len(outcomes) == 1:
        return outcomes[0]
    ordered = sorted(outcomes, key=lambda o: o.figures.get(key) or float("inf"))
    median = ordered[(len(ordered) - 1) // 2]
    figures = dict(median.figures)
    last = outcomes[-1].figures
    figures.update({k: v for k, v in last.items() if k.startswith("saturation")})  # measured in the last round only
    figures[f"{key}_rounds"] = [o.figures.get(key) for o in outcomes]
    figures["lost"] = max(o.figures["lost"] for o in outcomes)
    figures["stale"] = max(o.figures["stale"] for o in outcomes)
    figures["correct"] = all(o.figures["correct"] for o in outcomes)
    return Outcome(figures, median.curve)


def _finish(run: Run, systems: dict[str, dict[str, Any]], title: str, lines: list[str] | None = None) -> Run:
    """A single-size scenario's record and table: every system's figures, and their ratios to the best peer."""
    peers = [n for n in [*PEER_NAMES, *DB_FED] if n in systems]
    run.record["systems"] = systems
    run.record["ratios"] = ratios(systems, peers)
    run.tables.append(markdown(title, systems, peers, lines))
    return run


def _count_pairs(figures: dict[str, Any], delivered: float) -> None:
    """Count a delivered delta as one committed change brought to one subscriber that follows it (a batch or
    summary that reflects many changes brings many): the same unit for coalescing and forwarding systems."""
    if figures["deltas"]:
        figures["deltas_per_s"] = round(figures["deltas_per_s"] * delivered / figures["deltas"], 1)
    figures["deltas"] = int(delivered)
    figures["cpu_us_per_delta"] = round(figures["cpu_s"] * 1e6 / delivered, 3) if delivered else None
    figures["coalescing"] = round(delivered / figures["frames"], 1) if figures["frames"] else None


async def _published(redis: Redis, channel: str, team_id: int) -> int:
    """How many messages the relay has published on a channel (its position's seq)."""
    position = await history.position(redis, keys.Partitions().tag(team_id), channel)
    return position[1] if position is not None else 0


SCENARIOS: dict[str, Callable[..., Awaitable[Run]]] = {
    "fanout": fanout,
    "storm": storm,
    "steady": steady,
    "burst": burst,
}
