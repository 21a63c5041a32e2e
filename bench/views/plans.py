"""EXPLAIN of what the windows and the cards run: the count and the page statement of a window, built by the store's
own helpers so the plans are those served, and whether either scans submission_rows; the cards' deepest page with
EXPLAIN ANALYZE."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterator
from typing import Any

import asyncpg

from gateway.core.submission_window import Window
from gateway.store.submission_rows import EXACT_TO, estimate_statement, window_filter, window_statements

from ..sql import CARDS_PAGE, count_every_row, explained
from .common import CARD_PAGE
from .server import Kind
from .team import Team


def statements(team_id: int, window: Window, total: int | None) -> tuple[dict[str, str], list[object]]:
    """The count and the page statement of a window with `total` matching rows, as
    gateway.store.submission_rows.window() runs them."""
    count, page, args = window_statements(team_id, window, total)
    return {"count": count, "page": page}, args


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
    sqls, args = statements(team_id, kind.window(), kind.expected_total)
    out: dict[str, Any] = {"group": kind.group}
    async with pool.acquire() as db:
        for name, sql in sqls.items():
            raw = await db.fetchval(explained(sql), *args)
            plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
            seq = any(
                n["Node Type"] == "Seq Scan" and n.get("Relation Name") == "submission_rows" for n in plan_nodes(plan)
            )
            out[name] = {"seq_scan": seq, "plan": describe(plan), "cost": plan["Total Cost"], "json": plan}
    out["seq_scan"] = out["count"]["seq_scan"] or out["page"]["seq_scan"]
    return out


async def explain_cards(pool: asyncpg.Pool, team: Team) -> dict[str, Any]:
    """EXPLAIN ANALYZE of the cards' deepest page: its plan on one line and the time PostgreSQL spent."""
    sql = CARDS_PAGE.format(limit=CARD_PAGE, offset=max(0, team.trajectories - CARD_PAGE))
    raw = await pool.fetchval(explained(sql, analyze=True), team.id)
    top = (json.loads(raw) if isinstance(raw, str) else raw)[0]
    return {"plan": describe(top["Plan"]), "execution_ms": round(top["Execution Time"], 1)}


async def count_costs(pool: asyncpg.Pool, team_id: int, repeat: int) -> dict[str, Any]:
    """The whole team's total as the windows read it now (counted to EXACT_TO + 1, then the planner's estimate)
    against the count of every row they read before (`count(*)`), taking turns on one connection: p50 ms each and
    their ratio (the peer in the same run, so a busy machine weighs on both)."""
    window = Window()
    sqls, args = statements(team_id, window, None)
    where, _ = window_filter(team_id, window)
    before = count_every_row(where)
    estimate = estimate_statement(where)
    now_ms: list[float] = []
    before_ms: list[float] = []
    async with pool.acquire() as db:
        for _ in range(repeat):
            started = time.perf_counter()
            capped = await db.fetchval(sqls["count"], *args)
            if capped > EXACT_TO:
                await db.fetchval(estimate, *args)
            now_ms.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            exact = await db.fetchval(before, *args)
            before_ms.append((time.perf_counter() - started) * 1000)
    now_p50, before_p50 = statistics.median(now_ms), statistics.median(before_ms)
    return {
        "rows": exact,
        "now_p50_ms": round(now_p50, 1),
        "count_star_p50_ms": round(before_p50, 1),
        "ratio": round(now_p50 / before_p50, 3) if before_p50 else None,
        "repeat": repeat,
    }
