"""What connecting costs the node alone: C subscribers of one channel connect (each sent the channel's state
first, ~95 KB, as in `fanout`), and nothing else runs; the node's CPU until the last is live, per subscriber,
against Node `ws` in the same run, the systems taking turns.

    python -m bench.connect_cost [--size 1000] [--rounds 3] [--systems gateway,node-ws] [--jobs 200] [--profile DIR]

The same connect phase `python -m bench fanout` measures (bench.measure: handshake, token, subscribe, snapshot or
state), without its workload and saturation steps, so a round takes seconds and rounds can be many on a busy
machine. With `--profile DIR` (and py-spy on PATH or in PY_SPY) the gateway's node is sampled during each of its
connect phases, a speedscope file per round in DIR. `--jobs` sizes the channel: with 40,000 (`burst`'s trajectory,
a snapshot of 80 pages, too many to keep for later subscribers) it measures what a reconnect storm onto a big
trajectory, or a burst's slow subscribers told to reload it, cost the node a subscriber.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
from redis.asyncio import Redis

from harness.crowd import scrape

from .infra import raise_open_files, start_infra
from .load import Writer, build_world, mix_statuses
from .procstat import cpu_seconds
from .subscribers import Fleet
from .systems import SYSTEMS, Context, ensure_node_peers


async def _connect_once(
    name: str, ctx: Context, size: int, channel: str, token: str, profile: Path | None, turn: int
) -> dict[str, Any]:
    system = SYSTEMS[name]
    running = system.start(ctx)
    fleet: Fleet | None = None
    spy: subprocess.Popen[bytes] | None = None
    try:
        await asyncio.sleep(0.5)
        gateway = system.dialect.startswith("gateway")
        fleet = Fleet(
            f"ws://127.0.0.1:{running.port}{system.path}",
            system.dialect,
            lambda i: [channel],
            size,
            headers=(lambda i: {"Authorization": f"Bearer {token}"}) if gateway else None,
            connect_rate=1500.0,
            await_state=not gateway,
        )
        py_spy = os.environ.get("PY_SPY") or shutil.which("py-spy")
        if profile is not None and gateway and py_spy:
            out = profile / f"{name}-{size}-round{turn + 1}.speedscope.json"
            argv = [py_spy, "record", "-p", str(running.node_pids[0]), "-r", "500", "-f", "speedscope", "-o", str(out)]
            spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            await asyncio.sleep(0.5)
        started, cpu = time.monotonic(), cpu_seconds(running.node_pids)
        await fleet.start()
        live = await fleet.wait_live(60 + size / 100)
        connect_s, cpu = time.monotonic() - started, cpu_seconds(running.node_pids) - cpu
        row = {
            "live": live["live"],
            "connect_s": round(connect_s, 2),
            "connect_cpu_ms_per_sub": round(cpu * 1000 / size, 3),
        }
        if running.health_port:  # what the node's admission did meanwhile (it backs off while its loop runs late)
            row.update(await asyncio.to_thread(_admission, running.health_port))
        return row
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)
        if fleet is not None:
            await fleet.stop()
        running.stop()


def _admission(port: int) -> dict[str, float]:
    return scrape(f"http://127.0.0.1:{port}", _admission_figure)


def _admission_figure(name: str) -> bool:
    """The admission's rate and refusals, and the collector's pauses (their sums and counts, not buckets)."""
    admission = name.startswith(("gateway_handshakes_refused", "gateway_admission_rate"))
    return admission or name.startswith("gateway_gc_pause_seconds_") and "_bucket" not in name


async def main(size: int, rounds: int, names: list[str], profile: Path | None, jobs: int = 200) -> dict[str, Any]:
    raise_open_files()
    if "node-ws" in names:
        ensure_node_peers()
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        infra = await start_infra(Path(tmp))
        pool = await asyncpg.create_pool(infra.database_url, min_size=2, max_size=8)
        redis = Redis.from_url(infra.redis_url)
        logdir = Path(tmp) / "logs"
        logdir.mkdir()
        ctx = Context(infra.database_url, infra.redis_url, secrets.token_urlsafe(32), logdir)
        try:
            world = await build_world(pool, teams=1, trajectories_per_team=1, jobs_per_trajectory=jobs)
            team = world.teams[0]
            trajectory = world.trajectories[team][0]
            await mix_statuses(pool, trajectory)
            await Writer(pool, redis, world, per_tx=5, concurrency=2).share_state([trajectory])
            rows: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
            for turn in range(rounds):
                for name in names:
                    row = await _connect_once(
                        name, ctx, size, f"trajectory:{trajectory}", world.token(ctx.secret, team), profile, turn
                    )
                    rows[name].append(row)
                    print(f"round {turn + 1} {name}: {row}", flush=True)
        finally:
            await redis.aclose()
            await pool.close()
            await infra.close()
    return {"size": size, "jobs": jobs, "rounds": rows, "ratios": _ratios(rows)}


def _ratios(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per round, each system's connect CPU and time as multiples of Node ws's in the same round; their medians."""
    peer = rows.get("node-ws")
    if not peer:
        return {}
    found: dict[str, Any] = {}
    for name, own in rows.items():
        if name == "node-ws":
            continue
        cpu = [a["connect_cpu_ms_per_sub"] / b["connect_cpu_ms_per_sub"] for a, b in zip(own, peer)]
        live = [a["connect_s"] / b["connect_s"] for a, b in zip(own, peer)]
        found[name] = {
            "cpu_x": [round(x, 2) for x in cpu],
            "cpu_x_median": round(statistics.median(cpu), 2),
            "live_x": [round(x, 2) for x in live],
            "live_x_median": round(statistics.median(live), 2),
        }
    return found


def cli() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.connect_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--systems", default="gateway,node-ws")
    parser.add_argument("--jobs", type=int, default=200, help="jobs on the channel's trajectory")
    parser.add_argument("--profile", type=Path, default=None, help="a folder for py-spy profiles of the node")
    parser.add_argument("--out", type=Path, default=None, help="a JSON file for the figures")
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    found = asyncio.run(main(args.size, args.rounds, args.systems.split(","), args.profile, args.jobs))
    text = json.dumps(found, indent=2)
    print(json.dumps(found["ratios"], indent=2))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    cli()
