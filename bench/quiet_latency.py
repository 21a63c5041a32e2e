"""`python -m bench.quiet_latency`: how soon a change on a quiet channel reaches a subscriber, and what the relay
spends on it, when single-row commits come a fixed time apart (25 ms and 200 ms by default).

One team, one trajectory, one subscriber through the gateway (a node and a relay as `gateway serve` and
`gateway relay` run them). Each commit moves one job to a new version; the latency is from the commit's return
to the subscriber holding that version. Rounds alternate between the spacings. `--gateway-src DIR` runs the
gateway from another checkout (e.g. a `git worktree` of the commit before a change) with this tree's bench.

    python -m bench.quiet_latency --spacings 25,200 --commits 400 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

from bench import sql
from bench.infra import start_infra
from bench.load import build_world
from bench.procstat import exact_cpu_seconds
from bench.systems import SYSTEMS, Context
from harness.follower import Follower


async def one_spacing(
    pool: asyncpg.Pool, follower: Follower, channel: str, job: int, spacing: float, commits: int, relay_pid: int
) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    latencies = []
    cpu_before = exact_cpu_seconds(relay_pid)
    started = loop.time()
    for i in range(commits):
        slot = started + i * spacing
        await asyncio.sleep(max(0.0, slot - loop.time()))
        version = await pool.fetchval(sql.RENAME_JOB, job, f"Frame {i}")
        committed = loop.time()
        await follower.wait_for(lambda f, v=version: f.listed(channel).get(job, {}).get("version", 0) >= v, timeout=30)
        latencies.append(loop.time() - committed)
    elapsed = loop.time() - started
    cpu = exact_cpu_seconds(relay_pid) - cpu_before
    latencies.sort()
    return {
        "spacing_ms": spacing * 1000,
        "commits": commits,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * latencies[int(0.95 * (len(latencies) - 1))],
        "relay_cpu_ms_per_commit": 1000 * cpu / commits,
        "relay_cpu_share": cpu / elapsed,
    }


async def run(spacings: list[float], commits: int, rounds: int, gateway_src: str | None) -> list[dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="bench-quiet-") as tmp:
        infra = await start_infra(Path(tmp))
        if gateway_src:
            os.environ["PYTHONPATH"] = os.pathsep.join([gateway_src, os.environ.get("PYTHONPATH", "")])
        ctx = Context(infra.database_url, infra.redis_url, secrets.token_urlsafe(32), Path(tmp))
        running = SYSTEMS["gateway"].start(ctx)
        try:
            pool = await asyncpg.create_pool(infra.database_url, min_size=1, max_size=2)
            world = await build_world(pool, 1, 1, 1)
            team = world.teams[0]
            trajectory = world.trajectories[team][0]
            job = world.jobs[trajectory][0]
            channel = f"trajectory:{trajectory}"
            async with Follower(f"ws://127.0.0.1:{running.port}/ws", world.token(ctx.secret, team)) as follower:
                await follower.subscribe(channel)
                await follower.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=60)
                relay_pid = running.procs[1].pid
                results = []
                for r in range(rounds):
                    for spacing in spacings:
                        result = await one_spacing(pool, follower, channel, job, spacing, commits, relay_pid)
                        result["round"] = r
                        results.append(result)
                        print(json.dumps(result), flush=True)
            await pool.close()
            return results
        finally:
            running.stop()
            await infra.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spacings", default="25,200", help="milliseconds between commits, comma-separated")
    parser.add_argument("--commits", type=int, default=400, help="commits at each spacing in a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gateway-src", help="run the gateway from this checkout")
    parser.add_argument("--out", help="write the rounds here as JSON")
    args = parser.parse_args()
    spacings = [float(s) / 1000 for s in args.spacings.split(",")]
    results = asyncio.run(run(spacings, args.commits, args.rounds, args.gateway_src))
    print(f"{'spacing':>8} {'p50 ms':>8} {'p95 ms':>8} {'relay CPU ms/commit':>20}  (median of {args.rounds} rounds)")
    for spacing in spacings:
        rows = [r for r in results if r["spacing_ms"] == spacing * 1000]
        print(
            f"{spacing * 1000:>6.0f}ms {statistics.median(r['p50_ms'] for r in rows):>8.1f}"
            f" {statistics.median(r['p95_ms'] for r in rows):>8.1f}"
            f" {statistics.median(r['relay_cpu_ms_per_commit'] for r in rows):>20.3f}"
        )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"argv": sys.argv, "rounds": results, "at": time.time()}, indent=1))


if __name__ == "__main__":
    main()
