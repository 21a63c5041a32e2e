"""The Submissions page's and the dashboard's benchmark (bench/views/) at its `--quick` size: a test that it runs,
that every window and page of trajectories it times answers right, every plan is read and the streaming phase
wrote its changes and reported the page's long tasks, not of speed (timing is reported, never asserted here).

Its browser part needs Chromium: without it that part is skipped, unless GATEWAY_REQUIRE_BROWSER=1 makes it a
failure. No Node peer runs here, so the package's skip without Node.js does not apply.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gateway.core.submission_window import SORT_COLUMNS
from harness.browser import chromium_path
from tests.bench.test_harness import ROOT

N = 2_000
REPEAT = 5  # --quick: requests per kind of window
TRAJECTORIES = 50  # --quick: trajectories added (the team holds one more, with the submissions' tasks)
STREAM_SECONDS = 3.0  # --quick: seconds of task changes per phase


@pytest.fixture(autouse=True)
def node_peers() -> None:
    """Overrides tests/bench/conftest.py's: this benchmark needs no Node.js."""


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One `python -m bench.views --quick` run (on the tests' PostgreSQL when given one): its folder and record."""
    out = tmp_path_factory.mktemp("views")
    browser = chromium_path() is not None or os.environ.get("GATEWAY_REQUIRE_BROWSER") == "1"  # then it must run
    env = {**os.environ}
    if os.environ.get("TEST_DATABASE_URL"):
        env["BENCH_DATABASE_URL"] = os.environ["TEST_DATABASE_URL"]
    done = subprocess.run(
        [sys.executable, "-m", "bench.views", "--quick", "--out", str(out), *([] if browser else ["--no-browser"])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, json.loads((out / "views.json").read_text())


def test_every_window_answers_with_its_total_and_every_plan_is_read(views: tuple[Path, dict[str, Any]]) -> None:
    out, record = views
    assert record["size"]["submissions"] == N and record["size"]["tasks"] > 0
    assert record["commit"] and record["date"]
    kinds = record["kinds"]
    sorts = {f"sort {key} {direction}" for key in SORT_COLUMNS for direction in ("asc", "desc")}
    assert sorts <= set(kinds)
    assert {k["group"] for k in kinds.values()} == {"sort", "filter", "search", "offset"}
    for name, kind in kinds.items():
        assert kind["ok"], (name, kind["wrong"])  # every answer 200, with the right total and rows
    for name in sorts:
        assert kinds[name]["total"] == N
    assert kinds["project project-07"]["total"] == N // 20  # 20 projects, spread evenly
    assert kinds["search (10 rows)"]["total"] == 10
    assert 0 < kinds["status running"]["total"] < kinds["status pending"]["total"] < N  # statuses vary
    for state in ("analyzed", "vacuumed"):
        figures = record["states"][state]
        assert set(figures["explain"]) == set(kinds) == set(figures["server"]["kinds"])
        for name, plan in figures["explain"].items():
            for statement in ("count", "page"):  # both statements the store runs, explained
                assert plan[statement]["plan"] and isinstance(plan[statement]["seq_scan"], bool), (state, name)
        assert all(t["samples"] == REPEAT for t in figures["server"]["kinds"].values()), state
        assert figures["server"]["sort_filter_p95_ms"] is not None  # reported, never judged here
        assert isinstance(figures["seq_scans"]["judged"], list)
    assert record["seq_scan_enforced"] is False  # the planner may rightly read 2,000 rows whole
    table = (out / "views.md").read_text()
    for name in kinds:
        assert table.count(f"| {name} |") == 2, name  # a row per kind of window, in each state of the table
    assert "Sequential scans of submission_rows in a sort or filter" in table
    assert f"at {record['commit']}, {record['date']}" in table


def test_the_browser_draws_the_first_rows_and_sorts(views: tuple[Path, dict[str, Any]]) -> None:
    out, record = views
    browser = record["browser"]
    if "skipped" in browser:
        pytest.skip(f"the benchmark's browser part did not run: {browser['skipped']}")
    assert browser["wrong"] == []  # no page error; sorted by priority, the first row is the lowest priority's
    assert len(browser["loads"]) == 3 and all(
        x["first_rows_ms"] > 0 and x["sort_click_ms"] > 0 for x in browser["loads"]
    )
    assert "goto /submissions → first rows drawn" in (out / "views.md").read_text()


def test_the_dashboard_pages_answer_with_their_totals(views: tuple[Path, dict[str, Any]]) -> None:
    out, record = views
    size = record["size"]
    assert size["trajectories"] == TRAJECTORIES + 1 and size["jobs_per_trajectory"] == 20
    assert size["trajectory_jobs"] == TRAJECTORIES * 20 and size["jobs"] == size["tasks"] > size["trajectory_jobs"]
    assert record["setup_s"]["trajectories_written"] >= 0 and record["setup_s"]["listed_after_writes"] >= 0
    http = record["dashboard"]["http"]
    assert len(http) == 6 and {x["path"] for x in http.values()} == {
        "/api/teams/{id}/trajectories",
        "/api/teams/{id}/trajectories/active",
    }
    for name, x in http.items():
        assert x["ok"], (name, x["wrong"])  # 200, with the right total and rows
        for state in ("written", "analyzed"):  # as written, then after ANALYZE
            t = x[state]
            assert t["samples"] == REPEAT and t["p50_ms"] > 0 and t["p95_ms"] >= t["p50_ms"], (name, state)
    for state in ("written", "analyzed"):
        assert record["dashboard"]["explain"][state]["plan"], state  # the cards' deepest page, explained
    searches = [x for name, x in http.items() if "search" in name]
    assert len(searches) == 2 and all(x["total"] == 10 for x in searches)  # "run 002": runs 0020 to 0029
    assert all(x["total"] == TRAJECTORIES + 1 for name, x in http.items() if "search" not in name)
    table = (out / "views.md").read_text()
    assert f"### Dashboard and popover: {TRAJECTORIES + 1} trajectories" in table
    assert table.count("| cards: ") == 3 and table.count("| popover: ") == 3


def test_the_browser_draws_the_first_cards_the_popover_and_a_search(views: tuple[Path, dict[str, Any]]) -> None:
    out, record = views
    browser = record["dashboard"]["browser"]
    if "skipped" in browser:
        pytest.skip(f"the benchmark's browser part did not run: {browser['skipped']}")
    assert browser["wrong"] == []  # no page error; the counts read "51 of 51", "10 of 10"
    assert len(browser["loads"]) == 3
    for load in browser["loads"]:
        assert all(load[k] > 0 for k in ("first_cards_ms", "page_ms", "live_ms", "popover_ms", "search_ms")), load
    assert isinstance(browser["within_target"], bool)  # reported, never judged here
    table = (out / "views.md").read_text()
    assert "goto / → first cards drawn" in table and "the popover's count drawn" in table


def test_changes_stream_into_the_open_window_and_its_long_tasks_are_reported(
    views: tuple[Path, dict[str, Any]],
) -> None:
    out, record = views
    streaming = record["streaming"]
    if "skipped" in streaming:
        pytest.skip(f"the benchmark's browser part did not run: {streaming['skipped']}")
    assert streaming["wrong"] == []  # no page error
    assert streaming["seconds"] == STREAM_SECONDS and streaming["submissions"] == 200 and streaming["tasks"] == 2_000
    assert record["size"]["stream_tasks"] == 2_000
    phases = streaming["phases"]
    assert [(p["pointer"], p["changes"]) for p in phases] == [("away", False), ("away", True), ("over a row", True)]
    assert phases[0]["writes"]["changes"] == 0  # the baseline
    for phase in phases[1:]:
        assert phase["writes"]["changes"] > 0, phase  # some changes were written (about 1,000 a second)
        assert phase["writes"]["changes"] % streaming["batch"] == 0
        assert phase["relay_caught_up_s"] is not None, phase  # the relay folded every change into the rows
    for phase in phases:
        t = phase["long_tasks"]
        assert isinstance(t["count"], int) and len(t["longest_ms"]) == min(10, t["count"])
        assert 0 <= t["after_window_read"] <= t["count"]
        assert t["max_ms"] >= 0 and t["sum_ms"] >= t["max_ms"] and 0 <= t["busy_share"] <= 1
        assert phase["observed_s"] >= STREAM_SECONDS and phase["frames"] > 0
        assert isinstance(phase["within_target"], bool)  # reported, never judged here
    assert phases[2]["window_reads"] == 0 and not phases[2]["window_rows_moved"]  # nothing moves under the pointer
    table = (out / "views.md").read_text()
    assert "### Streaming into the open window: 1,000 task changes a second for 3 s" in table
    assert "| over a row | " in table and "(baseline: no changes)" in table
