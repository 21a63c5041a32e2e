"""The Submissions windows and the dashboard's pages over HTTP from a running node: each kind of request timed one
at a time, the kinds taking turns, every answer checked against what it must count; p50 and p95 per kind."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import httpx

from gateway.core.submission_window import SORT_COLUMNS, Window, parse_window
from gateway.store.submission_rows import EXACT_TO

from ..sql import EXPECTED_TOTAL, TRAJECTORIES_NAMED
from .common import CARD_PAGE, JUDGED, LIMIT, POP_PAGE, TARGET_SERVER_MS, percentile
from .team import Team


@dataclass
class Kind:
    """One kind of window: its query parameters (besides limit), and what it is judged as."""

    name: str
    group: str  # sort, filter, search, offset
    params: dict[str, str]
    expected_total: int = 0
    answered_total: int | None = None  # as the last answer said it (an estimate past EXACT_TO)
    samples: dict[str, list[float]] = field(default_factory=dict)  # ms, by the table's state
    wrong: list[str] = field(default_factory=list)  # answers that were not 200 with the right total and rows

    def window(self) -> Window:
        return parse_window({k: [v] for k, v in {**self.params, "limit": str(LIMIT)}.items()})


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
    words = re.findall(r"[^\W_]+", window.search.lower())  # the store's search: words, the last one begun
    total: int = await db.fetchval(
        EXPECTED_TOTAL,
        team_id,
        list(window.statuses),
        list(window.projects),
        list(window.users),
        words[:-1],
        words[-1] if words else "",
    )
    return total


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
    kind.answered_total = body["total"]
    exact = kind.expected_total <= EXACT_TO  # past it the answer is the planner's estimate, and says so
    total_ok = body["total"] == kind.expected_total if exact else body["total"] > EXACT_TO
    if body.get("total_exact") is not exact or not total_ok or len(body["rows"]) != rows:
        said = f"{body['total']}{'' if body.get('total_exact') else ' (an estimate)'}"
        return f"total {said} (expected {kind.expected_total}), {len(body['rows'])} rows (expected {rows})"
    return None


def search_term(count: int) -> str:
    """A part of about ten trajectories' names: "run 050" of "... run 0500" to "... run 0509" at 1,000."""
    return f"run {count // 2:04d}"[:-1]


@dataclass
class Listing:
    """One request of the dashboard's or the popover's: its path under the team, its parameters, what it answers."""

    name: str
    path: str  # "trajectories" (the cards) or "trajectories/active" (the popover)
    params: dict[str, str]
    total: int
    rows: int
    samples: dict[str, list[float]] = field(default_factory=dict)  # ms, by the tables' state
    wrong: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return "trajectories" if self.path == "trajectories" else "summaries"


async def listings(pool: asyncpg.Pool, team: Team, term: str) -> list[Listing]:
    total = team.trajectories  # every one holds jobs: the popover lists them all too
    found: int = await pool.fetchval(TRAJECTORIES_NAMED, team.id, f"%{term}%")
    out = []
    for path, label, page in (("trajectories", "cards", CARD_PAGE), ("trajectories/active", "popover", POP_PAGE)):
        deep = max(0, total - CARD_PAGE)
        out += [
            Listing(f"{label}: first page", path, {"limit": str(page)}, total, min(page, total)),
            Listing(f"{label}: search “{term}”", path, {"q": term, "limit": str(page)}, found, min(page, found)),
            Listing(
                f"{label}: offset {deep:,}",
                path,
                {"offset": str(deep), "limit": str(page)},
                total,
                min(page, total - deep),
            ),
        ]
    return out


async def time_listings(base: str, team: Team, all_listings: list[Listing], repeat: int, state: str) -> None:
    """Every listing `repeat` times, taking turns, one request at a time; each answer checked."""
    headers = {"Authorization": f"Bearer {team.token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        for i in range(repeat + 1):  # the first turn warms up: not counted
            for listing in all_listings:
                started = time.perf_counter()
                response = await client.get(f"/api/teams/{team.id}/{listing.path}", params=listing.params)
                ms = (time.perf_counter() - started) * 1000
                if i:
                    listing.samples.setdefault(state, []).append(ms)
                if response.status_code != 200:
                    listing.wrong.append(f"{response.status_code}: {response.text[:200]}")
                    continue
                body = response.json()
                if body["total"] != listing.total or len(body[listing.key]) != listing.rows:
                    listing.wrong.append(
                        f"total {body['total']} (expected {listing.total}), {len(body[listing.key])} rows"
                        f" (expected {listing.rows})"
                    )


def listing_figures(all_listings: list[Listing]) -> dict[str, Any]:
    def timing(samples: list[float]) -> dict[str, Any]:
        return {
            "samples": len(samples),
            "p50_ms": round(percentile(samples, 50) or 0, 1),
            "p95_ms": round(percentile(samples, 95) or 0, 1),
            "max_ms": round(max(samples, default=0), 1),
        }

    return {
        x.name: {
            "path": f"/api/teams/{{id}}/{x.path}",
            "params": x.params,
            "total": x.total,
            "rows": x.rows,
            **{state: timing(samples) for state, samples in x.samples.items()},
            "ok": not x.wrong,
            "wrong": x.wrong[:5],
        }
        for x in all_listings
    }


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
