"""A relay's start and memory with a team of N submissions: what a relay holds does not grow with every one.

    python -m bench.relay_start [--submissions 1000000] [--cached 100000]

One team of N submissions (bench.views' team, written as the platform writes them, no relay running). Then, one
relay process at a time, from the CLI:

1. the first start, nothing saved: it derives every row and saves it (a start after sql/011 or a lost table);
2. a restart with every row saved, `GATEWAY_RELAY_SUBMISSIONS_CACHED` at `--cached`: it sets aside the idle ones;
3. the same restart with the cache above N: every submission kept in memory, as every relay did before (the peer,
   in the same run).

Each: seconds from the process's start to its log's "state loaded", then to every row saved (1 only), and its
peak and settled RSS (VmHWM, VmRSS from /proc). Writes bench/results/relay_start.json and .md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

from harness.world import spawn

from . import sql
from .infra import start_infra
from .views.common import RESULTS, ROOT
from .views.team import populate


def _kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


async def start_relay(
    env: dict[str, str], logdir: Path, name: str, pool: asyncpg.Pool, n: int, until_saved: bool
) -> dict[str, Any]:
    """One relay from its start to its state loaded (and every row saved), then 5 s settled; its figures."""
    started = time.monotonic()
    relay = spawn(name, ["relay"], env, logdir)
    pid = relay.proc.pid
    loaded_s = saved_s = None
    try:
        while loaded_s is None:
            if relay.proc.poll() is not None:
                raise SystemExit(f"bench.relay_start: {name} exited:\n{relay.output()[-2000:]}")
            if "state loaded" in relay.output():
                loaded_s = time.monotonic() - started
            await asyncio.sleep(0.2)
        if until_saved:
            while await pool.fetchval(sql.ROWS_WITH_TOTALS) < n:  # the first start saves every row
                await asyncio.sleep(1.0)
            saved_s = time.monotonic() - started
        await asyncio.sleep(5.0)  # settled: what it holds while idle
        return {
            "loaded_s": round(loaded_s, 1),
            "saved_s": round(saved_s, 1) if saved_s is not None else None,
            "peak_rss_mib": round(_kib(pid, "VmHWM") / 1024, 1),
            "settled_rss_mib": round(_kib(pid, "VmRSS") / 1024, 1),
        }
    finally:
        relay.stop()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    clock = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - clock:6.1f}s] {message}", flush=True)

    n, record = args.submissions, {}
    with tempfile.TemporaryDirectory(prefix="bench-relay-start-") as tmp:
        workdir = Path(tmp)
        infra = await start_infra(workdir)
        pool = await asyncpg.create_pool(infra.database_url, min_size=1, max_size=2)
        try:
            await populate(pool, secrets.token_urlsafe(32), n, say)
            env = {**os.environ, "DATABASE_URL": infra.database_url, "REDIS_URL": infra.redis_url}
            runs = [
                ("first start, nothing saved", args.cached, True),
                ("restart, every row saved", args.cached, False),
                ("restart, every row saved, every submission kept (as before)", n * 2, False),
            ]
            for i, (label, cached, until_saved) in enumerate(runs):
                say(f"{label}: GATEWAY_RELAY_SUBMISSIONS_CACHED={cached:,}")
                run_env = {**env, "GATEWAY_RELAY_SUBMISSIONS_CACHED": str(cached)}
                figures = await start_relay(run_env, workdir, f"relay{i}", pool, n, until_saved)
                say(f"  {figures}")
                record[label] = {"cached": cached, **figures}
        finally:
            await pool.close()
            await infra.close()
    return record


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.relay_start", description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=1_000_000)
    parser.add_argument("--cached", type=int, default=100_000, help="GATEWAY_RELAY_SUBMISSIONS_CACHED")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    out: dict[str, Any] = {
        "benchmark": "relay_start",
        "commit": commit.stdout.strip() or "unknown",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.relay_start " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "submissions": args.submissions,
        "load_average": os.getloadavg(),
        "runs": asyncio.run(run(args)),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "relay_start.json").write_text(json.dumps(out, indent=2) + "\n")
    lines = [
        "## `relay_start`",
        "",
        f"`{out['command']}` at {out['commit']}, {out['date']}; {args.submissions:,} submissions in one team.",
        "",
        "| run | cache | state loaded (s) | every row saved (s) | peak RSS MiB | settled RSS MiB |",
        "|---|---|---|---|---|---|",
    ]
    for label, r in out["runs"].items():
        lines.append(
            f"| {label} | {r['cached']:,} | {r['loaded_s']} | {r['saved_s'] or ''} | {r['peak_rss_mib']}"
            f" | {r['settled_rss_mib']} |"
        )
    (args.out / "relay_start.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
