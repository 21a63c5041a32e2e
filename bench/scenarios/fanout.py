"""`fanout`: one change a second to C subscribers of one channel, node CPU per frame against the floor, and the
saturation steps."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import asyncpg
from redis.asyncio import Redis

from ..load import World, Writer, build_world, database_state, mix_statuses
from ..measure import Outcome, Plan, measure, settle
from ..report import markdown, ratios
from ..subscribers import Fleet
from ..systems import BASELINES, COMPRESSED, PEER_NAMES, SYSTEMS, WORKERS, Context
from .common import Progress, Run, median_round, turns

SATURATION_STEPS = (2, 4, 8, 16, 32)  # commit rates, as multiples of the fixed rate


SATURATION_P99_MS = 500.0  # past this p99 (commit to receipt) a system no longer keeps up, up to 4,000 subscribers


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
        for turn, name in turns(names, rounds):
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
            # The node alone, by its own median round (the same round as above for a peer: it has no relay).
            node_rounds = [o.figures.get("node_cpu_us_per_frame") for o in outcomes]
            median.figures["node_cpu_us_per_frame_rounds"] = node_rounds
            median.figures["node_cpu_us_per_frame_median"] = _median(node_rounds)
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
    # --quick is a test of the harness: one step runs the whole path of a step (its load, the drain, the judgement,
    # the table's row) for every system; only the full run climbs until a system falls behind.
    for multiple in SATURATION_STEPS[:1] if quick else SATURATION_STEPS:
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


def _median(values: list[float | None]) -> float | None:
    known = sorted(v for v in values if v is not None)
    return known[(len(known) - 1) // 2] if known else None


def _fanout_checks(systems: dict[str, dict[str, Any]], size: int) -> list[str]:
    """The targets of the fanout scenario, as measured in this run at `size` subscribers: node CPU per frame
    (the processes holding the sockets, as the peers' one process does: the target's definition), then the
    gateway's node and relay together (what the whole gateway costs; a peer's tap is the harness's, uncounted)."""
    gw, floor, node = systems.get("gateway"), systems.get("floor"), systems.get("node-ws")
    lines: list[str] = []
    for key, what in (("node_cpu_us_per_frame_median", "node alone"), ("cpu_us_per_frame", "node + relay")):
        for peer, against, goal in ((floor, "the raw-write floor", "≤ 1.15"), (node, "Node ws", "< 1")):
            if gw and peer and gw.get(key) and peer.get("cpu_us_per_frame"):
                lines.append(
                    f"- gateway CPU per frame, {what}: {gw[key]:.2f} µs, {gw[key] / peer['cpu_us_per_frame']:.2f} × "
                    f"{against} (target {goal})"
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
