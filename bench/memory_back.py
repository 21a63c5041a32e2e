"""`python -m bench.memory_back`: a node's resident memory before its clients come, at their peak, and after
they all leave (for another node), in the node's own figures (/metrics).

A relay and a node (as `gateway serve` and `gateway relay` run them), one team; each round, `--clients` real
websockets follow the team's channel and a trajectory's while changes flow, then every one closes. After they
left, the node must hold no connection, subscription or channel, and its RSS is read once it has settled
(no lower for `--settle` seconds). tests/integration/test_memory_back.py holds the same path with margins.
`--gateway-src DIR` runs the gateway from another checkout (a `git worktree` of the commit before a change):
run this file from that folder, whose `gateway` the node's `python -m` finds first, with this tree on PYTHONPATH.

    python -m bench.memory_back --clients 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

import asyncpg

from bench import sql
from bench.infra import raise_open_files, start_infra
from bench.load import build_world
from bench.systems import SYSTEMS, Context
from harness.crowd import Crowd, figures

MIB = 1 << 20


async def writes(pool: asyncpg.Pool, jobs: list[int], stop: asyncio.Event) -> None:
    """Five job changes every 50 ms on the trajectory the clients follow (the team's channel sees each)."""
    i = 0
    while not stop.is_set():
        batch = [jobs[(i + k) % len(jobs)] for k in range(5)]
        await pool.execute(sql.TOUCH_JOBS, batch)
        i += 5
        await asyncio.sleep(0.05)


async def settled(http: str, settle: float, timeout: float = 300.0) -> dict[str, float]:
    """The node's figures once it holds nothing of its clients and its RSS has not dropped for `settle` s."""
    deadline = time.monotonic() + timeout
    low, low_at = float("inf"), time.monotonic()
    while time.monotonic() < deadline:
        found = await asyncio.to_thread(figures, http)
        held = found["gateway_connections"] + found["gateway_subscriptions"] + found["gateway_channels"]
        rss = found["process_resident_memory_bytes"]
        if held or rss < low:
            low, low_at = (rss if not held else float("inf")), time.monotonic()
        elif time.monotonic() - low_at >= settle:
            return found
        await asyncio.sleep(0.5)
    raise RuntimeError(f"the node still held its clients' structures after {timeout:g} s: {found}")


async def run(clients: int, rounds: int, settle: float, gateway_src: str | None) -> list[dict[str, float]]:
    raise_open_files()
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        infra = await start_infra(Path(tmp))
        if gateway_src:
            os.environ["PYTHONPATH"] = os.pathsep.join([gateway_src, os.environ.get("PYTHONPATH", "")])
        ctx = Context(infra.database_url, infra.redis_url, secrets.token_urlsafe(32), Path(tmp))
        running = SYSTEMS["gateway"].start(ctx)
        http, ws = f"http://127.0.0.1:{running.port}", f"ws://127.0.0.1:{running.port}/ws"
        try:
            pool = await asyncpg.create_pool(infra.database_url, min_size=1, max_size=4)
            world = await build_world(pool, 1, 1, 200)
            team = world.teams[0]
            trajectory = world.trajectories[team][0]
            channels = [f"team:{team}", f"trajectory:{trajectory}"]
            token = world.token(ctx.secret, team)
            first = Crowd(ws, token, channels, 1)  # what a node makes once, whoever connects, is made first
            await first.arrive()
            await first.leave()
            before = await settled(http, settle)
            results = []
            for r in range(rounds):
                stop = asyncio.Event()
                writer = asyncio.create_task(writes(pool, world.jobs[trajectory], stop))
                crowd = Crowd(ws, token, channels, clients)
                try:
                    await crowd.arrive()
                    while min(crowd.received) < 3:  # every client follows its channels and receives changes
                        await asyncio.sleep(0.5)
                    peak = await asyncio.to_thread(figures, http)
                    await crowd.leave()
                finally:
                    stop.set()
                    await writer
                after = await settled(http, settle)
                result = {
                    "round": r,
                    "clients": clients,
                    "rss_before_mib": round(before["process_resident_memory_bytes"] / MIB, 1),
                    "rss_peak_mib": round(peak["process_resident_memory_bytes"] / MIB, 1),
                    "rss_after_mib": round(after["process_resident_memory_bytes"] / MIB, 1),
                    "connections_peak": peak["gateway_connections"],
                    "memory_returns": after.get("gateway_memory_returns_total", 0),
                }
                result["kept_of_growth"] = round(
                    (result["rss_after_mib"] - result["rss_before_mib"])
                    / max(0.1, result["rss_peak_mib"] - result["rss_before_mib"]),
                    2,
                )
                results.append(result)
                print(json.dumps(result), flush=True)
            await pool.close()
            return results
        finally:
            running.stop()
            await infra.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3, help="waves of clients arriving and leaving")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds the RSS must not drop to be read")
    parser.add_argument("--gateway-src", help="run the gateway from this checkout")
    parser.add_argument("--out", help="write the rounds here as JSON")
    args = parser.parse_args()
    results = asyncio.run(run(args.clients, args.rounds, args.settle, args.gateway_src))
    print(f"{'round':>5} {'before MiB':>10} {'peak MiB':>9} {'after MiB':>10} {'kept of growth':>15}")
    for r in results:
        print(
            f"{r['round']:>5} {r['rss_before_mib']:>10} {r['rss_peak_mib']:>9} {r['rss_after_mib']:>10}"
            f" {r['kept_of_growth']:>15}"
        )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"argv": sys.argv, "rounds": results, "at": time.time()}, indent=1))


if __name__ == "__main__":
    main()
