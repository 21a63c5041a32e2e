"""The Submissions page at a farm's scale: how fast a window of 100 rows answers, sorted or filtered, over N rows.

    python -m bench.views [--submissions 100000] [--rounds 3] [--repeat 20] [--quick] [--no-browser]

One team holds N submissions, written as the platform writes them (plain SQL, in batches: ~20 projects, several
users, priorities, titles, sizes and staging spread), and analysis tasks on some of them (mixed statuses, so
status, progress, tasks and average frame time vary); the relay saves every row into submission_rows. Measured:

- server: every sort key of SORT_COLUMNS in both directions, the filters (a rare and a common status, a project,
  a user, a filter with a sort), a search and a deep offset, each a window of 100 rows over HTTP from a running
  node, `--repeat` times a round, the kinds taking turns; p50 and p95 per kind and the p95 of every sort and
  filter together (the issue's target: 300 ms);
- EXPLAIN: the count and the page statement of each window, built by the store's own helpers, after ANALYZE;
  a Seq Scan of submission_rows in either is reported; in the page statement of a sort or filter it makes the
  run exit non-zero at the full size (100,000 rows and more). A count reads every matching row whatever the
  plan (with one team in the table, reading it whole is the planner's right choice until VACUUM marks its pages
  all-visible), and a search by substring and a deep offset are reported, not judged;
- browser: in Chromium, signed in as a member, from `page.goto('/submissions')` to the first window drawn (the
  pager reads "1–100 of N"), and a click on the PRIORITY header until the first row changes (target: 1 s).

Writes bench/results/views.json and views.md (with the commit and the date). Without Chromium the browser part
is skipped and said so, unless GATEWAY_REQUIRE_BROWSER=1 makes that an error.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import platform
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from gateway.core.submission_window import SORT_COLUMNS, Window, parse_window
from gateway.store.submission_rows import _order, _where

from .infra import start_infra
from .systems import SYSTEMS, Context

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
FULL = 100_000  # the size: at it (and above), a sort or filter plan that scans the table fails the run
QUICK = 2_000
TARGET_SERVER_MS = 300.0  # p95 of a sort or filter
TARGET_BROWSER_MS = 1_000.0  # first rows after navigation
PROJECTS = 20
USERS = 8
LIMIT = 100
BATCH = 10_000  # submissions per INSERT statement
JUDGED = ("sort", "filter")  # the kinds the targets and the no-seq-scan rule are about
LOADS_PER_ROUND = 3  # browser navigations (each followed by a sort click) per round
LIVE = "window.gatewayLive && document.body.dataset.live === 'live'"
FIRST_ROW = "document.querySelector('tbody tr[data-sub]')?.dataset.sub"
# The pager's text once the first window is drawn ("1–100 of 100,000"); the page's clock then.
DRAWN = "() => (document.querySelector('.pager .range')?.textContent || '').includes(' of ') && performance.now()"

TITLES = [
    "Copper grain",
    "Ocean swell",
    "City at night",
    "Forest fog",
    "Desert wind",
    "Glass atrium",
    "Harbour crane",
    "Rain on tin",
    "Snow field",
    "Turbine hall",
    "Volcano rim",
]
# Plain SQL, as the platform writes: users, projects, titles, priorities, sizes and staging spread over the rows;
# one in 50 submitted by a cluster (no user), created a second apart up to now.
INSERT_SUBMISSIONS = """
insert into submissions (team_id, user_id, project, title, priority, cores, memory_gb, preemptible, staging,
                         instance_type, created_at)
select $1,
       case when i % 50 = 0 then null else ($2::bigint[])[1 + (i * 7) % cardinality($2::bigint[])] end,
       'project-' || lpad(((i * 13) % $5)::text, 2, '0'),
       ($6::text[])[1 + i % cardinality($6::text[])] || ' shot ' || lpad(i::text, 6, '0'),
       (i * 37) % 100,
       (array[2, 4, 8, 16, 32])[1 + i % 5],
       (array[8, 16, 32, 64, 128])[1 + (i / 5) % 5],
       i % 3 = 0,
       case when i % 97 = 0 then 'uploading' when i % 89 = 0 then 'sync_failed' when i % 83 = 0 then 'syncing'
            else 'ready' end,
       case when i % 3 = 0 then 'spot' else 'standard' end,
       now() - ($7 - i) * interval '1 second'
from generate_series($3::int, $4::int) i
"""
# Analysis tasks on every `every`-th submission, 1 to 7 each, in one of six mixes (all done, one running, all
# queued, one failed, half queued, held with one preempted), the finished ones taking 1 to 120 s.
INSERT_JOBS = """
insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status, started_at)
select $1, $2, $3, 'analysis', 'Analysis frame', f, s.id, st.status,
       case when st.status in ('completed', 'failed') then now() - (1 + (s.n * 31 + f * 17) % 120) * interval '1 second' end
from (select id, id - $7 as n from submissions where team_id = $1 and id >= $4 and id <= $5) s
cross join lateral generate_series(0, (s.n % 7)::int) f
cross join lateral (select case (s.n / $6) % 6
    when 0 then 'completed'
    when 1 then case when f = 0 then 'running' else 'completed' end
    when 2 then 'queued'
    when 3 then case when f = 0 then 'failed' else 'completed' end
    when 4 then case when f % 2 = 0 then 'completed' else 'queued' end
    else case when f = 0 then 'preempted' else 'holding' end end as status) st
where s.n % $6 = 0
"""


@dataclass
class Kind:
    """One kind of window: its query parameters (besides limit), and what it is judged as."""

    name: str
    group: str  # sort, filter, search, offset
    params: dict[str, str]
    expected_total: int = 0
    samples: dict[str, list[float]] = field(default_factory=dict)  # ms, by the table's state
    wrong: list[str] = field(default_factory=list)  # answers that were not 200 with the right total and rows

    def window(self) -> Window:
        return parse_window({k: [v] for k, v in {**self.params, "limit": str(LIMIT)}.items()})


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile (q in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def kinds(n: int, user_id: int) -> list[Kind]:
    out = [
        Kind(f"sort {key} {direction}", "sort", {"sort": key, "dir": direction})
        for key in SORT_COLUMNS
        for direction in ("asc", "desc")
    ]
    out += [
        Kind("status running", "filter", {"status": "running"}),
        Kind("status pending", "filter", {"status": "pending"}),
        Kind("project project-07", "filter", {"project": "project-07"}),
        Kind("user (one of 8)", "filter", {"user": str(user_id)}),
        Kind("status pending, sort priority desc", "filter", {"status": "pending", "sort": "priority", "dir": "desc"}),
        Kind("search (10 rows)", "search", {"q": f"shot {n // 2:06d}"[:-1]}),
        Kind(f"offset {max(0, n - LIMIT):,}", "offset", {"offset": str(max(0, n - LIMIT))}),
    ]
    return out


async def expected_total(db: asyncpg.Connection, team_id: int, window: Window) -> int:
    """The rows a window must count, by plain conditions (not the store's WHERE)."""
    pattern = window.search.lower()
    total: int = await db.fetchval(
        "select count(*) from submission_rows where team_id = $1"
        " and ($2::text[] = '{}' or status = any($2)) and ($3::text[] = '{}' or project = any($3))"
        " and ($4::bigint[] = '{}' or user_id = any($4))"
        " and ($5 = '' or strpos(lower(title), $5) > 0 or strpos(lower(project), $5) > 0"
        "      or strpos(lower(user_name), $5) > 0)",
        team_id,
        list(window.statuses),
        list(window.projects),
        list(window.users),
        pattern,
    )
    return total


@dataclass
class Team:
    id: int
    user_ids: list[int]
    token: str
    submissions: int
    jobs: int


async def populate(pool: asyncpg.Pool, secret: str, n: int, say: Callable[[str], None]) -> Team:
    """A team with USERS members, N submissions and analysis tasks on some, saved by the relay."""
    from tests.integration.conftest import make_team  # a team, its member, a cluster, a trajectory, a token

    team = await make_team(pool, secret)
    others = await pool.fetch(
        "insert into users (name) select 'artist ' || lpad(i::text, 2, '0') from generate_series(2, $1) i returning id",
        USERS,
    )
    user_ids = [team.user_id, *(r["id"] for r in others)]
    await pool.execute("insert into memberships select $1, unnest($2::bigint[])", team.id, user_ids[1:])
    started = time.monotonic()
    for low in range(1, n + 1, BATCH):
        await pool.execute(INSERT_SUBMISSIONS, team.id, user_ids, low, min(n, low + BATCH - 1), PROJECTS, TITLES, n)
    say(f"{n:,} submissions written in {time.monotonic() - started:.1f} s")
    every = max(20, math.ceil(n / 5_000))  # about 20,000 tasks at 100,000 submissions, never many more
    low, high = await pool.fetchrow("select min(id), max(id) from submissions where team_id = $1", team.id)
    jobs = 0
    for first in range(low, high + 1, BATCH * 5):
        done = await pool.execute(
            INSERT_JOBS, team.id, team.trajectory_id, team.cluster_id, first, first + BATCH * 5 - 1, every, low
        )
        jobs += int(done.split()[-1])
    say(f"{jobs:,} tasks written on every {every}th submission")
    return Team(team.id, user_ids, team.token, n, jobs)


async def wait_saved(pool: asyncpg.Pool, team: Team, say: Callable[[str], None], timeout: float) -> float:
    """Until the relay saved every row with every task counted; the seconds it took."""
    started = time.monotonic()
    last = -1
    while True:
        rows, tasks = await pool.fetchrow(
            "select count(*), coalesce(sum(tasks), 0) from submission_rows where team_id = $1", team.id
        )
        if rows == team.submissions and tasks == team.jobs:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise SystemExit(f"bench.views: the relay saved {rows:,} of {team.submissions:,} rows in {timeout:.0f} s")
        if rows // 10_000 != last // 10_000:
            say(f"relay saved {rows:,} rows, {tasks:,} tasks counted")
        last = rows
        await asyncio.sleep(0.5)


def statements(team_id: int, window: Window) -> tuple[dict[str, str], list[object]]:
    """The count and the page statement of a window, as gateway.store.submission_rows.window() runs them."""
    where, args = _where(team_id, window)
    page = (
        f"select row from submission_rows where {where} {_order(window)}"
        f" limit {int(window.limit)} offset {int(window.offset)}"
    )
    return {"count": f"select count(*) from submission_rows where {where}", "page": page}, args


def plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from plan_nodes(child)


def describe(plan: dict[str, Any]) -> str:
    """A plan on one line: each node's type, its index or relation, outermost first."""
    parts = []
    for node in plan_nodes(plan):
        where = node.get("Index Name") or node.get("Relation Name")
        parts.append(node["Node Type"] + (f" ({where})" if where else ""))
    return " > ".join(parts)


async def explain(pool: asyncpg.Pool, team_id: int, kind: Kind) -> dict[str, Any]:
    """EXPLAIN (FORMAT JSON) of the window's two statements: each one's plan, and whether it scans the table."""
    sqls, args = statements(team_id, kind.window())
    out: dict[str, Any] = {"group": kind.group}
    async with pool.acquire() as db:
        for name, sql in sqls.items():
            raw = await db.fetchval(f"explain (format json) {sql}", *args)
            plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
            seq = any(
                n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "submission_rows" for n in plan_nodes(plan)
            )
            out[name] = {"seq_scan": seq, "plan": describe(plan), "cost": plan["Total Cost"], "json": plan}
    out["seq_scan"] = out["count"]["seq_scan"] or out["page"]["seq_scan"]
    return out


async def time_windows(base: str, token: str, team_id: int, all_kinds: list[Kind], repeat: int, state: str) -> None:
    """Every kind `repeat` times, taking turns, one request at a time; each answer checked."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        for i in range(repeat + 1):  # the first turn warms the connection and the node: not counted
            for kind in all_kinds:
                started = time.perf_counter()
                response = await client.get(f"/api/teams/{team_id}/submissions", params={**kind.params, "limit": LIMIT})
                ms = (time.perf_counter() - started) * 1000
                if i:
                    kind.samples.setdefault(state, []).append(ms)
                problem = check(response, kind)
                if problem:
                    kind.wrong.append(problem)


def check(response: httpx.Response, kind: Kind) -> str | None:
    if response.status_code != 200:
        return f"{response.status_code}: {response.text[:200]}"
    body = response.json()
    offset = int(kind.params.get("offset", 0))
    rows = min(LIMIT, max(0, kind.expected_total - offset))
    if body["total"] != kind.expected_total or len(body["rows"]) != rows:
        return f"total {body['total']} (expected {kind.expected_total}), {len(body['rows'])} rows (expected {rows})"
    return None


def chromium() -> str | None:
    from tests.browser.conftest import _chromium

    return _chromium()


async def browser_rounds(base: str, token: str, rounds: int, first_by_priority: int) -> dict[str, Any]:
    """In Chromium: navigations to /submissions until the first window is drawn, each followed by a sort click."""
    from playwright.async_api import async_playwright

    from tests.browser.conftest import ARGS
    from tests.browser.helpers import sign_in

    loads: list[dict[str, float]] = []
    wrong: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium(), args=ARGS)
        try:
            # Playwright's polling waits evaluate strings, which the Content-Security-Policy refuses: bypassed, as
            # in the browser tests.
            context = await browser.new_context(viewport={"width": 1200, "height": 800}, bypass_csp=True)
            page = await context.new_page()
            page.on("pageerror", lambda e: wrong.append(f"page error: {e}"))
            await sign_in(page, base, token)
            await page.wait_for_function(LIVE)
            for _ in range(rounds * LOADS_PER_ROUND):
                started = time.perf_counter()
                await page.goto(f"{base}/submissions", wait_until="commit")
                drawn = await page.wait_for_function(DRAWN, timeout=60_000)
                first_rows = (time.perf_counter() - started) * 1000
                page_ms = float(await drawn.json_value())  # the page's clock: since its navigation started
                before = await page.evaluate(f"() => {FIRST_ROW}")
                started = time.perf_counter()
                await page.click("button[data-sort='priority']")
                await page.wait_for_function(f"() => {FIRST_ROW} !== {json.dumps(before)}", timeout=60_000)
                sort_ms = (time.perf_counter() - started) * 1000
                first = await page.evaluate(f"() => {FIRST_ROW}")
                if str(first) != str(first_by_priority):
                    wrong.append(f"sorted by priority, the first row is {first}, not {first_by_priority}")
                loads.append({"first_rows_ms": first_rows, "page_ms": page_ms, "sort_click_ms": sort_ms})
            await context.close()
        finally:
            await browser.close()
    firsts = [x["first_rows_ms"] for x in loads]
    sorts = [x["sort_click_ms"] for x in loads]
    return {
        "loads": loads,
        "first_rows_cold_ms": firsts[0],
        "first_rows_p50_ms": percentile(firsts, 50),
        "first_rows_max_ms": max(firsts),
        "sort_click_p50_ms": percentile(sorts, 50),
        "sort_click_max_ms": max(sorts),
        "within_target": max(firsts) <= TARGET_BROWSER_MS,
        "wrong": wrong,
    }


def git_commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


async def measure_state(
    pool: asyncpg.Pool, team: Team, all_kinds: list[Kind], base: str, state: str, rounds: int, repeat: int
) -> dict[str, Any]:
    """The table's pages, every window's plans, then `rounds` rounds of requests, in the table's present state."""
    table = await pool.fetchrow(
        "select relpages, relallvisible from pg_class where relname = 'submission_rows'",
    )
    plans = {kind.name: await explain(pool, team.id, kind) for kind in all_kinds}
    for _ in range(rounds):
        await time_windows(base, team.token, team.id, all_kinds, repeat, state)
    return {
        "table": {"pages": table["relpages"], "all_visible_pages": table["relallvisible"]},
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
            saved_s = await wait_saved(pool, team, say, timeout=max(120.0, n / 100))
            say(f"the relay saved every row {saved_s:.1f} s after the last write")
            record["size"] = {
                "submissions": n,
                "tasks": team.jobs,
                "users": USERS,
                "projects": PROJECTS,
                "window": LIMIT,
                "rounds": args.rounds,
                "repeat": args.repeat,
            }
            record["setup_s"] = {"total": round(time.monotonic() - started, 1), "relay_after_writes": round(saved_s, 1)}
            record["autovacuum"] = await pool.fetchval("show autovacuum")
            all_kinds = kinds(n, team.user_ids[1])
            async with pool.acquire() as db:
                for kind in all_kinds:
                    kind.expected_total = await expected_total(db, team.id, kind.window())
            states: dict[str, Any] = {}
            await pool.execute("analyze submission_rows")
            say(
                f"as written, after ANALYZE: EXPLAIN, then {args.rounds} round(s) of {len(all_kinds)} kinds x {args.repeat}"
            )
            states["analyzed"] = await measure_state(pool, team, all_kinds, base, "analyzed", args.rounds, args.repeat)
            if browser_wanted:
                say(f"browser: {args.rounds * LOADS_PER_ROUND} navigations to /submissions, each with a sort click")
                first = await pool.fetchval(
                    "select id from submission_rows where team_id = $1 order by priority, id limit 1", team.id
                )
                browser = await browser_rounds(base, team.token, args.rounds, first)
            await pool.execute("vacuum (analyze) submission_rows")
            say(
                f"after VACUUM (what autovacuum leaves): EXPLAIN, then 1 round of {len(all_kinds)} kinds x {args.repeat}"
            )
            states["vacuumed"] = await measure_state(pool, team, all_kinds, base, "vacuumed", 1, args.repeat)
        finally:
            gateway.stop()
            await pool.close()
            await infra.close()
    record["kinds"] = {
        k.name: {
            "group": k.group,
            "params": k.params,
            "total": k.expected_total,
            "ok": not k.wrong,
            "wrong": k.wrong[:5],
        }
        for k in all_kinds
    }
    record["states"] = states
    record["seq_scan_enforced"] = n >= FULL  # on the plans after ANALYZE
    record["browser"] = browser
    return record


def server_figures(all_kinds: list[Kind], state: str) -> dict[str, Any]:
    judged = [ms for k in all_kinds if k.group in JUDGED for ms in k.samples.get(state, ())]
    p95 = percentile(judged, 95)
    kinds_out = {}
    for k in all_kinds:
        samples = k.samples.get(state, [])
        kinds_out[k.name] = {
            "samples": len(samples),
            "p50_ms": round(percentile(samples, 50) or 0, 1),
            "p95_ms": round(percentile(samples, 95) or 0, 1),
            "max_ms": round(max(samples, default=0), 1),
        }
    return {
        "kinds": kinds_out,
        "sort_filter_p95_ms": None if p95 is None else round(p95, 1),
        "target_ms": TARGET_SERVER_MS,
        "within_target": p95 is not None and p95 <= TARGET_SERVER_MS,
    }


def _plan_cell(plan: dict[str, Any]) -> str:
    return ("**SEQ SCAN** " if plan["seq_scan"] else "") + plan["plan"]


def _scans(state: dict[str, Any], statement: str, groups: tuple[str, ...]) -> str:
    """The kinds whose `statement` scans the table, "every sort" standing for all of them."""
    plans = state["explain"]
    names = [name for name, p in plans.items() if p["group"] in groups and p[statement]["seq_scan"]]
    sorts = [name for name, p in plans.items() if p["group"] == "sort"]
    if sorts and set(sorts) <= set(names):
        names = [f"every sort ({len(sorts)})"] + [name for name in names if name not in sorts]
    return ", ".join(names) or "none"


def markdown(record: dict[str, Any]) -> str:
    size = record["size"]
    lines = [
        "## `views`",
        "",
        f"`{record['command']}` at {record['commit']}, {record['date']}",
        "",
        f"{size['submissions']:,} submissions in one team ({size['projects']} projects, {size['users']} users),"
        f" {size['tasks']:,} tasks; windows of {size['window']} rows over HTTP from one node, the kinds taking turns."
        f" Setup {record['setup_s']['total']} s (the relay done {record['setup_s']['relay_after_writes']} s after"
        f" the last write). This server's autovacuum: {record['autovacuum']}.",
    ]
    titles = {
        "analyzed": "as the relay wrote it, after ANALYZE",
        "vacuumed": "after VACUUM (ANALYZE), as autovacuum would leave it",
    }
    for name, state in record["states"].items():
        server = state["server"]
        samples = next(iter(server["kinds"].values()))["samples"]
        lines += [
            "",
            f"### The table {titles[name]}: {state['table']['pages']:,} pages,"
            f" {state['table']['all_visible_pages']:,} all-visible; {samples} requests per kind",
            "",
            "| query | kind | total | p50 ms | p95 ms | max ms | answers | count plan | page plan |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for kind, k in record["kinds"].items():
            t, plan = server["kinds"][kind], state["explain"][kind]
            answers = "ok" if k["ok"] else f"WRONG ({len(k['wrong'])})"
            lines.append(
                f"| {kind} | {k['group']} | {k['total']:,} | {t['p50_ms']:.1f} | {t['p95_ms']:.1f} | {t['max_ms']:.1f}"
                f" | {answers} | {_plan_cell(plan['count'])} | {_plan_cell(plan['page'])} |"
            )
        lines += [
            "",
            f"p95 of every sort and filter: {server['sort_filter_p95_ms']} ms (target {server['target_ms']:.0f} ms:"
            f" {'met' if server['within_target'] else 'NOT met'}).",
            "Sequential scans of submission_rows in a sort or filter: the count of "
            + _scans(state, "count", JUDGED)
            + "; the page of "
            + _scans(state, "page", JUDGED)
            + ". In a search or a deep offset (not judged): the count of "
            + _scans(state, "count", ("search", "offset"))
            + "; the page of "
            + _scans(state, "page", ("search", "offset"))
            + ".",
        ]
    if not record["seq_scan_enforced"]:
        lines += ["", f"The plans are not judged below {FULL:,} rows: a small table is rightly read whole."]
    browser = record["browser"]
    if "skipped" in browser:
        lines += ["", f"Browser: skipped ({browser['skipped']})."]
    else:
        lines += [
            "",
            f"### Browser (Chromium, {len(browser['loads'])} navigations, the table as written)",
            "",
            "| measure | first (cold) ms | p50 ms | max ms |",
            "|---|---|---|---|",
            f"| goto /submissions → first rows drawn | {browser['first_rows_cold_ms']:.0f} |"
            f" {browser['first_rows_p50_ms']:.0f} | {browser['first_rows_max_ms']:.0f} |",
            f"| click PRIORITY → first row changed | {browser['loads'][0]['sort_click_ms']:.0f} |"
            f" {browser['sort_click_p50_ms']:.0f} | {browser['sort_click_max_ms']:.0f} |",
            "",
            f"Target: first rows within {TARGET_BROWSER_MS:.0f} ms of navigation:"
            f" {'met' if browser['within_target'] else 'NOT met'}"
            + (f"; wrong: {'; '.join(browser['wrong'][:3])}" if browser["wrong"] else "")
            + ".",
        ]
    return "\n".join(lines) + "\n"


def failures(record: dict[str, Any]) -> list[str]:
    """What fails the run, whatever the machine's speed: a wrong answer or page, a table scan at FULL rows."""
    out = [f"{name}: {k['wrong'][0]}" for name, k in record["kinds"].items() if not k["ok"]]
    out += record["browser"].get("wrong", [])
    judged = record["states"]["analyzed"]["seq_scans"]["judged"]
    if record["seq_scan_enforced"] and judged:
        out.append(f"a sequential scan of submission_rows after ANALYZE in {len(judged)} sort/filter page(s)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.views", description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=FULL, help="rows in the team (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every measurement (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=20, help="requests per kind of window a round (default 20)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK:,} submissions, 1 round, 5 requests per kind")
    parser.add_argument("--no-browser", action="store_true", help="skip the Chromium part")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where views.json and views.md go")
    args = parser.parse_args()
    if args.quick:
        args.submissions, args.rounds, args.repeat = QUICK, 1, 5
    if args.submissions < LIMIT or args.rounds < 1 or args.repeat < 1:
        parser.error(f"--submissions takes at least {LIMIT}, --rounds and --repeat at least 1")
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


if __name__ == "__main__":
    main()
