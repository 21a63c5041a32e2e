"""`python -m bench <scenario> [--quick]`: start what is measured, run it, write bench/results/<scenario>.*

Everything the run needs is started here: a fresh database on the machine's PostgreSQL (or an embedded
one), a private valkey-server, the gateway's relay and node, each peer in turn. Set BENCH_DATABASE_URL or
BENCH_REDIS_URL to use servers of your own.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
from redis.asyncio import Redis

from .infra import raise_open_files, start_infra
from .report import write
from .scenarios import FANOUT_SIZES, SCENARIOS
from .systems import SYSTEMS, Context, ensure_node_peers

RESULTS = Path(__file__).resolve().parent / "results"
SPARE_FDS = 1_000  # a server's descriptors besides its subscribers' sockets (Redis, PostgreSQL, logs, libraries)
ROUNDS = ("fanout", "steady", "burst")  # the scenarios whose CPU figures are read as ratios between systems


def _progress(started: float):
    def say(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", flush=True)

    return say


async def run(
    scenario: str, quick: bool, only: list[str], out: Path, rounds: int = 1, sizes: list[int] | None = None
) -> dict:
    say = _progress(time.monotonic())
    limit = raise_open_files()
    if sizes and max(sizes) + SPARE_FDS > limit:  # the server under test holds every subscriber's socket
        raise SystemExit(f"bench: {max(sizes):,} subscribers need an open-files limit above {max(sizes) + SPARE_FDS:,}")
    if any(n in ("node-ws", "socket.io") for n in (only or SYSTEMS)):
        ensure_node_peers()
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        workdir = Path(tmp)
        say(f"starting PostgreSQL and Redis (open files limit {limit})")
        infra = await start_infra(workdir)
        pool = await asyncpg.create_pool(infra.database_url, min_size=2, max_size=8)
        redis = Redis.from_url(infra.redis_url)
        logdir = out / "logs"
        logdir.mkdir(parents=True, exist_ok=True)
        ctx = Context(infra.database_url, infra.redis_url, secrets.token_urlsafe(32), logdir)
        try:
            options: dict[str, object] = {"rounds": rounds} if rounds > 1 else {}
            if sizes:
                options["sizes"] = sizes
            result = await SCENARIOS[scenario](ctx, pool, redis, quick, only, say, **options)
        finally:
            await redis.aclose()
            await pool.close()
            await infra.close()
    result.record["command"] = "python -m bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    result.record["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    write(out, scenario, result.record, result.tables, result.curves)
    say(f"wrote {out / scenario}.json, .md and .png")
    print("\n".join(result.tables))
    return result.record


async def run_faults(quick: bool, out: Path) -> dict:
    """`faults` starts its own world (an embedded PostgreSQL it can restart): see bench/faults.py."""
    from . import faults

    say = _progress(time.monotonic())
    raise_open_files()
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as tmp:
        record = await faults.run(Path(tmp), quick, say)
    record["command"] = "python -m bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    record["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    out.mkdir(parents=True, exist_ok=True)
    (out / "faults.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "faults.md").write_text(faults.markdown(record))
    say(f"wrote {out / 'faults'}.json and .md")
    print(faults.markdown(record))
    return record


async def run_deploy(quick: bool, out: Path, subscribers: int | None) -> dict:
    """`deploy` starts its own world (two nodes behind HAProxy): see bench/deploy.py."""
    from . import deploy

    say = _progress(time.monotonic())
    limit = raise_open_files()
    say(f"open files limit {limit}")
    with tempfile.TemporaryDirectory(prefix="bench-deploy-") as tmp:
        logs = RESULTS / "logs" / "deploy"  # kept after the run (git ignores bench/results/logs)
        shutil.rmtree(logs, ignore_errors=True)
        record = await deploy.run(Path(tmp), quick, say, subscribers, logs)
        say(f"the processes' logs: {logs}")
    record["command"] = "python -m bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    record["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    out.mkdir(parents=True, exist_ok=True)
    (out / "deploy.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "deploy.md").write_text(deploy.markdown(record))
    say(f"wrote {out / 'deploy'}.json and .md")
    print(deploy.markdown(record))
    return record


def _sizes(parser: argparse.ArgumentParser, text: str) -> list[int]:
    try:
        sizes = [int(s.replace("_", "")) for s in text.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes takes comma-separated counts, not {text!r}")
    if not sizes or min(sizes) < 1:
        parser.error("--sizes takes positive counts")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=sorted([*SCENARIOS, "faults", "deploy"]))
    parser.add_argument("--quick", action="store_true", help="small sizes: a test of the harness and of correctness")
    parser.add_argument("--systems", help=f"comma-separated subset of {', '.join(SYSTEMS)}")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results go (default bench/results)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="fanout, steady, burst: measure each system this many times, taking turns, and report the median round",
    )
    parser.add_argument(
        "--sizes",
        help="fanout: comma-separated subscriber counts (default "
        + ",".join(map(str, FANOUT_SIZES))
        + "); storm: the number of clients (the largest given; default 4000). 16000 needs an open-files limit"
        " above it: see bench/infra.py",
    )
    parser.add_argument(
        "--subscribers", type=int, help="deploy: how many subscribers (default 16000; 300 with --quick)"
    )
    args = parser.parse_args()
    sizes = _sizes(parser, args.sizes) if args.sizes else None
    if args.subscribers is not None and (args.scenario != "deploy" or args.subscribers < 1):
        parser.error("--subscribers takes a positive count, for deploy only")
    if sizes and args.scenario not in ("fanout", "storm"):
        parser.error("--sizes is for fanout and storm only")
    if args.rounds < 1 or (args.rounds > 1 and args.scenario not in ROUNDS):
        parser.error(f"--rounds takes a positive count, and more than 1 only for {', '.join(ROUNDS)}")
    only = [s.strip() for s in args.systems.split(",")] if args.systems else []
    unknown = [s for s in only if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s): {', '.join(unknown)}")
    if args.scenario == "faults":
        record = asyncio.run(run_faults(args.quick, args.out))
        phases = record["phases"]
        if any(p["lost"] or p["stale"] for p in phases) or any(p["recovery_s"] is None for p in phases[:-1]):
            sys.exit("bench: a subscriber did not end at the database's state after a fault")
        return
    if args.scenario == "deploy":
        record = asyncio.run(run_deploy(args.quick, args.out, args.subscribers))
        restarts = record["restarts"]
        if len(restarts) < 2 or any(
            r["lost"] or r["stale"] or r["duplicates"] or r["current_s"] is None or r["exit_code"] for r in restarts
        ):
            sys.exit("bench: a rolling deploy lost or repeated something, left a subscriber behind, or a node failed")
        return
    record = asyncio.run(run(args.scenario, args.quick, only, args.out, args.rounds, sizes))
    wrong = [
        name for name, figures in record["systems"].items() if name.startswith("gateway") and not figures.get("correct")
    ]
    if wrong:
        sys.exit("bench: the gateway's subscribers did not end at the database's state")


if __name__ == "__main__":
    main()
