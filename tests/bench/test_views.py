"""The Submissions page's benchmark (bench/views.py) at its `--quick` size: a test that it runs, that every window
it times answers right and every plan is read, not of speed (timing is reported, never asserted here).

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
from tests.bench.test_harness import ROOT
from tests.browser.conftest import _chromium

N = 2_000
REPEAT = 5  # --quick: requests per kind of window


@pytest.fixture(autouse=True)
def node_peers() -> None:
    """Overrides tests/bench/conftest.py's: this benchmark needs no Node.js."""


@pytest.fixture(scope="module")
def views(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One `python -m bench.views --quick` run (on the tests' PostgreSQL when given one): its folder and record."""
    out = tmp_path_factory.mktemp("views")
    browser = _chromium() is not None or os.environ.get("GATEWAY_REQUIRE_BROWSER") == "1"  # then it must run
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
