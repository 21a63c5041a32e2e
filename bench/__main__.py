"""`python -m bench <scenario> [--quick]`: start what is measured, run it, write bench/results/<scenario>.*

Everything the run needs is started by the scenario (bench/registry.py): a fresh database on the machine's
PostgreSQL (or an embedded one), a private valkey-server, the gateway's relay and node, each peer in turn. Set
BENCH_DATABASE_URL or BENCH_REDIS_URL to use servers of your own.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from .registry import RESULTS, SCENARIOS, Options, taking
from .scenarios import FANOUT_SIZES
from .systems import SYSTEMS


def _progress(started: float):
    def say(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", flush=True)

    return say


async def run(scenario: str, options: Options) -> dict[str, Any]:
    """The one path of every scenario: its world started, measured and stopped; its results written."""
    say = _progress(time.monotonic())
    entry = SCENARIOS[scenario]
    result = await entry.run(options, say)
    result.record["command"] = "python -m bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    result.record["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    wrote, tables = entry.write(options.out, scenario, result)
    say(wrote)
    print(tables)
    return result.record


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
    parser.add_argument("scenario", choices=sorted(SCENARIOS))
    parser.add_argument("--quick", action="store_true", help="small sizes: a test of the harness and of correctness")
    parser.add_argument(
        "--systems", help=f"{', '.join(taking('systems'))}: comma-separated subset of {', '.join(SYSTEMS)}"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where results go (default bench/results)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help=f"{', '.join(taking('rounds'))}: measure each system this many times, taking turns, and report the"
        " median round",
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
    parser.add_argument(
        "--pin",
        action="store_true",
        help="deploy: the relay, nodes and HAProxy on every CPU but the last, the subscribers' processes on that one",
    )
    args = parser.parse_args()
    takes = SCENARIOS[args.scenario].takes
    sizes = _sizes(parser, args.sizes) if args.sizes else None
    if args.subscribers is not None and ("subscribers" not in takes or args.subscribers < 1):
        parser.error(f"--subscribers takes a positive count, for {' and '.join(taking('subscribers'))} only")
    if args.pin and "pin" not in takes:
        parser.error(f"--pin is for {' and '.join(taking('pin'))} only")
    if sizes and "sizes" not in takes:
        parser.error(f"--sizes is for {' and '.join(taking('sizes'))} only")
    if args.rounds < 1 or (args.rounds > 1 and "rounds" not in takes):
        parser.error(f"--rounds takes a positive count, and more than 1 only for {', '.join(taking('rounds'))}")
    if args.systems and "systems" not in takes:
        parser.error(f"--systems is for {', '.join(taking('systems'))} only ({args.scenario} measures the gateway)")
    only = [s.strip() for s in args.systems.split(",")] if args.systems else []
    unknown = [s for s in only if s not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system(s): {', '.join(unknown)}")
    options = Options(args.out, args.quick, only, args.rounds, sizes, args.subscribers, args.pin)
    record = asyncio.run(run(args.scenario, options))
    failure = SCENARIOS[args.scenario].failure(record)
    if failure:
        sys.exit(f"bench: {failure}")


if __name__ == "__main__":
    main()
