"""`python -m bench.views`: its options, and the run in order (PostgreSQL, Redis and a node; the team; the windows
after ANALYZE, the browser, the dashboard, the windows after VACUUM; streaming last, as its changes move the rows
the windows count), then views.json and views.md."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg

from .. import sql
from ..infra import start_infra
from ..systems import SYSTEMS, Context
from . import __doc__ as USAGE
from .browser import browser_rounds, chromium, dashboard_rounds
from .common import (
    FULL,
    JOBS_PER_TRAJECTORY,
    JUDGED,
    LIMIT,
    LOADS_PER_ROUND,
    PROJECTS,
    QUICK,
    QUICK_STREAM_SECONDS,
    QUICK_TRAJECTORIES,
    RESULTS,
    ROOT,
    STREAM_RATE,
    STREAM_SECONDS,
    STREAM_TICK,
    TRAJECTORIES,
    USERS,
)
from .plans import count_costs, explain, explain_cards
from .report import failures, markdown
from .server import (
    Kind,
    expected_total,
    kinds,
    listing_figures,
    listings,
    search_term,
    server_figures,
    time_listings,
    time_windows,
)
from .streaming import stream_phases
from .team import Team, populate, populate_trajectories, wait_listed, wait_saved


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


async def measure_state(
    pool: asyncpg.Pool, team: Team, all_kinds: list[Kind], base: str, state: str, rounds: int, repeat: int
) -> dict[str, Any]:
    """The table's pages, every window's plans, then `rounds` rounds of requests, in the table's present state."""
    table = await pool.fetchrow(sql.ROWS_TABLE_PAGES)
    plans = {kind.name: await explain(pool, team.id, kind) for kind in all_kinds}
    for _ in range(rounds):
        await time_windows(base, team.token, team.id, all_kinds, repeat, state)
    return {
        "table": {"pages": table["relpages"], "all_visible_pages": table["relallvisible"]},
        "count": await count_costs(pool, team.id, repeat),
        "server": server_figures(all_kinds, state),
        "explain": plans,
        "seq_scans": {
            "judged": [name for name, p in plans.items() if p["group"] in JUDGED and p["page"]["seq_scan"]],
            "counts": [name for name, p in plans.items() if p["group"] in JUDGED and p["count"]["seq_scan"]],
            "other": [name for name, p in plans.items() if p["group"] not in JUDGED and p["seq_scan"]],
        },
    }


async def run(args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, Any]:
    n = args.submissions
    browser_wanted = not args.no_browser
    browser: dict[str, Any] = {"skipped": "--no-browser"}
    if browser_wanted and chromium() is None:
        if os.environ.get("GATEWAY_REQUIRE_BROWSER") == "1":
            raise SystemExit("bench.views: Chromium is required (GATEWAY_REQUIRE_BROWSER=1) but is not installed")
        browser_wanted = False
        browser = {"skipped": "Chromium is not installed"}
        say("Chromium is not installed: the browser part is skipped")
    dashboard: dict[str, Any] = {"browser": dict(browser)}
    streaming: dict[str, Any] = dict(browser)
    record: dict[str, Any] = {
        "benchmark": "views",
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "python -m bench.views " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
    }
    with tempfile.TemporaryDirectory(prefix="bench-views-") as tmp:
        workdir = Path(tmp)
        say("starting PostgreSQL and Redis")
        infra = await start_infra(workdir)
        pool = await asyncpg.create_pool(infra.database_url, min_size=1, max_size=4)
        (workdir / "logs").mkdir()
        ctx = Context(infra.database_url, infra.redis_url, secrets.token_urlsafe(32), workdir / "logs")
        # Its relay and one node, which inherit this environment: the windows are timed one after another, far
        # past a person's 50 requests a second (GATEWAY_HTTP_RATE), so that limit is lifted here.
        os.environ["GATEWAY_HTTP_RATE"] = "0"
        gateway = SYSTEMS["gateway"].start(ctx)
        base = f"http://127.0.0.1:{gateway.port}"
        try:
            started = time.monotonic()
            team = await populate(pool, ctx.secret, n, say)
            written = time.monotonic()
            await populate_trajectories(pool, team, args.trajectories, args.jobs_per_trajectory, say)
            trajectories_s = time.monotonic() - written
            saved_s = await wait_saved(pool, team, say, timeout=max(120.0, n / 100, team.all_jobs / 2_000))
            say(f"the relay saved every row {saved_s:.1f} s after the last write")
            listed_s = saved_s + await wait_listed(base, team, say, timeout=max(120.0, team.all_jobs / 2_000))
            say(f"the team lists every trajectory with every job {listed_s:.1f} s after the last write")
            record["size"] = {
                "submissions": n,
                "tasks": team.jobs,
                "users": USERS,
                "projects": PROJECTS,
                "window": LIMIT,
                "rounds": args.rounds,
                "repeat": args.repeat,
                "trajectories": team.trajectories,
                "jobs_per_trajectory": args.jobs_per_trajectory,
                "trajectory_jobs": team.trajectory_jobs,
                "jobs": team.all_jobs,
                "stream_submissions": len(team.stream_submissions),
                "stream_tasks": len(team.stream_running) + len(team.stream_completed),
            }
            record["setup_s"] = {
                "total": round(time.monotonic() - started, 1),
                "trajectories_written": round(trajectories_s, 1),
                "relay_after_writes": round(saved_s, 1),
                "listed_after_writes": round(listed_s, 1),
            }
            record["autovacuum"] = await pool.fetchval(sql.AUTOVACUUM)
            all_kinds = kinds(n, team.user_ids[1])
            async with pool.acquire() as db:
                for kind in all_kinds:
                    kind.expected_total = await expected_total(db, team.id, kind.window())
            states: dict[str, Any] = {}
            await pool.execute(sql.ANALYZE_ROWS)
            say(
                f"as written, after ANALYZE: EXPLAIN, then {args.rounds} round(s) of {len(all_kinds)} kinds x {args.repeat}"
            )
            states["analyzed"] = await measure_state(pool, team, all_kinds, base, "analyzed", args.rounds, args.repeat)
            if browser_wanted:
                say(f"browser: {args.rounds * LOADS_PER_ROUND} navigations to /submissions, each with a sort click")
                first = await pool.fetchval(sql.FIRST_BY_PRIORITY, team.id)
                browser = await browser_rounds(base, team.token, args.rounds, first)
            term = search_term(args.trajectories)
            all_listings = await listings(pool, team, term)
            say(f"dashboard, as written: {args.rounds} round(s) of {len(all_listings)} requests x {args.repeat}")
            dashboard["search"] = term
            dashboard["explain"] = {"written": await explain_cards(pool, team)}
            for _ in range(args.rounds):
                await time_listings(base, team, all_listings, args.repeat, "written")
            if browser_wanted:
                say(f"browser: {args.rounds * LOADS_PER_ROUND} navigations to /, each with the popover and a search")
                dashboard["browser"] = await dashboard_rounds(base, team, args.rounds, term, all_listings[1].total)
            # What autovacuum's ANALYZE leaves (this server's autovacuum may be off): the cards' statement reads
            # submissions, which nothing analyzed so far.
            await pool.execute(sql.ANALYZE_CARDS)
            say(f"dashboard, after ANALYZE: 1 round of {len(all_listings)} requests x {args.repeat}")
            dashboard["explain"]["analyzed"] = await explain_cards(pool, team)
            await time_listings(base, team, all_listings, args.repeat, "analyzed")
            dashboard["http"] = listing_figures(all_listings)
            await pool.execute(sql.VACUUM_ROWS)
            say(
                f"after VACUUM (what autovacuum leaves): EXPLAIN, then 1 round of {len(all_kinds)} kinds x {args.repeat}"
            )
            states["vacuumed"] = await measure_state(pool, team, all_kinds, base, "vacuumed", 1, args.repeat)
            if browser_wanted:  # last: the changes move the rows the windows above count
                say(
                    f"streaming: {STREAM_RATE:,} task changes a second for {args.stream_seconds:g} s, twice, after a baseline"
                )
                streaming = await stream_phases(base, pool, team, args.stream_seconds)
                for phase in streaming["phases"]:
                    t = phase["long_tasks"]
                    say(
                        f"pointer {phase['pointer']}: {phase['writes']['changes']:,} changes, {t['count']} long tasks"
                        f" (max {t['max_ms']} ms, {t['busy_share']:.1%} of {phase['observed_s']} s)"
                    )
        finally:
            gateway.stop()
            await pool.close()
            await infra.close()
    record["kinds"] = {
        k.name: {
            "group": k.group,
            "params": k.params,
            "total": k.expected_total,
            "answered": k.answered_total,  # an estimate past 100,000 (gateway.store.submission_rows.EXACT_TO)
            "ok": not k.wrong,
            "wrong": k.wrong[:5],
        }
        for k in all_kinds
    }
    record["states"] = states
    record["seq_scan_enforced"] = n >= FULL  # on the plans after ANALYZE
    record["browser"] = browser
    record["dashboard"] = dashboard
    record["streaming"] = streaming
    return record


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.views", description=USAGE.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=FULL, help="rows in the team (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every measurement (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=20, help="requests per kind of window a round (default 20)")
    parser.add_argument(
        "--trajectories", type=int, default=TRAJECTORIES, help="trajectories added to the team (default %(default)s)"
    )
    parser.add_argument(
        "--jobs-per-trajectory",
        type=int,
        default=JOBS_PER_TRAJECTORY,
        help="jobs on each (default %(default)s; the issue's figure is 2000)",
    )
    parser.add_argument(
        "--stream-seconds",
        type=float,
        default=STREAM_SECONDS,
        help="seconds of task changes into the open window, per pointer position (default %(default)s)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK:,} submissions, {QUICK_TRAJECTORIES} trajectories, {QUICK_STREAM_SECONDS:g} s of streaming,"
        " 1 round, 5 requests per kind",
    )
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium part")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where views.json and views.md go")
    args = parser.parse_args()
    if args.quick:
        args.submissions, args.rounds, args.repeat = QUICK, 1, 5
        args.trajectories, args.stream_seconds = QUICK_TRAJECTORIES, QUICK_STREAM_SECONDS
    if args.submissions < LIMIT or args.rounds < 1 or args.repeat < 1:
        parser.error(f"--submissions takes at least {LIMIT}, --rounds and --repeat at least 1")
    if not 1 <= args.trajectories <= args.submissions // 2 or args.jobs_per_trajectory < 1:
        parser.error("--trajectories takes 1 to half the submissions, --jobs-per-trajectory at least 1")
    if args.stream_seconds < STREAM_TICK:
        parser.error(f"--stream-seconds takes at least {STREAM_TICK}")
    clock = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - clock:6.1f}s] {message}", flush=True)

    record = asyncio.run(run(args, say))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "views.json").write_text(json.dumps(record, indent=2, default=str) + "\n")
    table = markdown(record)
    (args.out / "views.md").write_text(table)
    say(f"wrote {args.out / 'views'}.json and .md")
    print(table)
    wrong = failures(record)
    if wrong:
        sys.exit("bench.views: " + "; ".join(wrong))
