"""The Jobs view's rules against the JSON vectors the browser runs too (frontend/vectors/jobs-view.json)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gateway.core.finish import notice_title
from gateway.core.grouping import group_key, group_label, make_group
from gateway.core.menu import menu_actions
from gateway.core.model import Counts
from gateway.core.status import (
    BUCKET_OF,
    LISTED,
    attempt_label,
    buckets,
    colour,
    group_status,
    listed_status,
    ring_fill,
    ring_label,
    word,
)

ROOT = Path(__file__).resolve().parents[2]
VECTORS: dict[str, Any] = json.loads((ROOT / "frontend" / "vectors" / "jobs-view.json").read_text())


def cases(name: str) -> list[dict[str, Any]]:
    return VECTORS[name]


@pytest.mark.parametrize("case", cases("statuses"), ids=lambda c: c["status"])
def test_every_status_has_its_word_colour_and_bucket(case: dict[str, Any]) -> None:
    assert (word(case["status"]), colour(case["status"])) == (case["word"], case["colour"])
    assert BUCKET_OF.get(case["status"]) == case["bucket"]


def test_the_status_table_lists_every_status_of_a_job_and_of_a_group() -> None:
    listed = {c["status"] for c in cases("statuses")}
    assert set(LISTED) | {"neutral", "empty"} == listed
    assert {c["expect"] for c in cases("group_status")} <= listed


def test_a_status_no_table_knows_shows_as_itself() -> None:
    assert (word("frozen"), colour("frozen")) == ("frozen", "neutral")


@pytest.mark.parametrize("case", cases("buckets"))
def test_buckets(case: dict[str, Any]) -> None:
    assert buckets(case["counts"]) == case["expect"]


@pytest.mark.parametrize("case", cases("group_status"))
def test_group_status(case: dict[str, Any]) -> None:
    assert group_status(case["counts"]) == case["expect"], case.get("why")


@pytest.mark.parametrize("case", cases("colour"))
def test_colour(case: dict[str, Any]) -> None:
    assert colour(case["status"]) == case["expect"]


@pytest.mark.parametrize("case", cases("ring_label"))
def test_ring_label(case: dict[str, Any]) -> None:
    assert ring_label(case["counts"]) == case["expect"]


@pytest.mark.parametrize("case", cases("ring_fill"))
def test_ring_fill(case: dict[str, Any]) -> None:
    assert ring_fill(case["counts"]) == case["expect"]


@pytest.mark.parametrize("case", cases("group_key"))
def test_group_key(case: dict[str, Any]) -> None:
    assert group_key(case["kind"], case["frame"]) == case["expect"]


@pytest.mark.parametrize("case", cases("group_label"))
def test_group_label(case: dict[str, Any]) -> None:
    assert group_label(case["key"], case["jobs"]) == case["expect"]


@pytest.mark.parametrize("case", cases("attempt_label"), ids=lambda c: str(c["attempts"]))
def test_attempt_label(case: dict[str, Any]) -> None:
    assert attempt_label(case["attempts"]) == case["expect"], case.get("why")


@pytest.mark.parametrize("case", cases("group_opens_by_itself"))
def test_groups_with_transfers_open_by_themselves(case: dict[str, Any]) -> None:
    assert make_group(case["key"], Counts(queued=1), None).open is case["expect"]


@pytest.mark.parametrize("case", cases("listed_status"))
def test_listed_status(case: dict[str, Any]) -> None:
    job = case["job"]
    assert listed_status(job["status"], job.get("silent_since")) == case["expect"], case.get("why")


@pytest.mark.parametrize("case", cases("notice_title"))
def test_notice_title(case: dict[str, Any]) -> None:
    assert list(notice_title(case["analysis"], case["rasterize"], case["failed"])) == case["expect"]


def test_the_browser_rules_pass_the_same_vectors() -> None:
    """Node.js runs frontend/js/rules.js against the same JSON: every table here is run there too, and passes."""
    if shutil.which("node") is None:
        if os.environ.get("GATEWAY_REQUIRE_NODE") == "1":
            pytest.fail("Node.js is required (GATEWAY_REQUIRE_NODE=1) to run the browser's rules against the vectors")
        pytest.skip("Node.js is not installed: frontend/js/rules.js not run here (CI sets GATEWAY_REQUIRE_NODE=1)")
    browser_tests = (ROOT / "frontend" / "tests" / "rules.test.mjs").read_text()
    tables = [name for name, value in VECTORS.items() if isinstance(value, list)]
    assert tables and [name for name in tables if f"v.{name}." not in browser_tests] == []
    result = subprocess.run(
        ["node", "--test", str(ROOT / "frontend" / "tests")], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    tally = dict(
        line[2:].split(" ", 1) for line in result.stdout.splitlines() if line.startswith("# ") and " " in line[2:]
    )
    assert tally["fail"] == "0" and tally["skipped"] == "0" and tally["todo"] == "0" and tally["cancelled"] == "0"
    assert int(tally["pass"]) == int(tally["tests"]) >= len(tables)


@pytest.mark.parametrize("case", cases("menu_actions"), ids=lambda c: c["why"])
def test_the_menu_offers_only_what_applies_to_every_selected_row(case: dict[str, Any]) -> None:
    assert menu_actions((r["staging"], r["counts"]) for r in case["rows"]) == case["expect"]
