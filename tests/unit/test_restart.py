"""A restarting node's goodbye (gateway.core.restart): the close reason's retry hint, read alike by the Python
client and the browser (frontend/vectors/restart.json), and the hints spread so no two connections share one."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from gateway.core.restart import restart_reason, retry_after_ms, spread, spread_window

ROOT = Path(__file__).resolve().parents[2]
VECTORS_PATH = ROOT / "frontend" / "vectors" / "restart.json"
CASES: list[dict[str, Any]] = json.loads(VECTORS_PATH.read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["reason"] or "(empty)")
def test_the_retry_hint_is_read_from_a_close_reason_as_the_vectors_say(case: dict[str, Any]) -> None:
    assert retry_after_ms(case["reason"]) == case["retry_after_ms"]


def test_the_browser_reads_the_retry_hint_as_the_vectors_say() -> None:
    if shutil.which("node") is None:
        if os.environ.get("GATEWAY_REQUIRE_NODE") == "1":
            pytest.fail("Node.js is required (GATEWAY_REQUIRE_NODE=1) to run frontend/js/live.js against the vectors")
        pytest.skip("Node.js is not installed: frontend/js/live.js not run here")
    script = (
        'import { readFileSync } from "node:fs";'
        f'import {{ retryAfterMs }} from "{(ROOT / "frontend" / "js" / "live.js").as_uri()}";'
        f"const v = JSON.parse(readFileSync({json.dumps(str(VECTORS_PATH))}, 'utf8'));"
        "console.log(JSON.stringify(v.cases.map((c) => retryAfterMs(c.reason))));"
    )
    done = subprocess.run(
        ["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [c["retry_after_ms"] for c in CASES]


def test_the_reason_carries_its_hint_within_a_close_frame() -> None:
    reason = restart_reason(29_999)
    assert retry_after_ms(reason) == 29_999
    assert reason.startswith("server restarting: connect again") and len(reason.encode()) <= 123


def test_every_connection_gets_its_own_delay_spread_evenly_over_the_window() -> None:
    delays = spread(8_000, 8.0, random.Random(7).random)
    assert len(delays) == len(set(delays)) == 8_000  # one slot of a millisecond each: all different
    assert min(delays) >= 0 and max(delays) < 8_000
    per_second = [sum(1 for d in delays if s * 1000 <= d < (s + 1) * 1000) for s in range(8)]
    assert per_second == [1_000] * 8  # as many come back in every second of the window
    assert delays[:10] != sorted(delays[:10])  # not in the order the connections came


def test_the_window_paces_the_reconnects_at_the_rate_given_up_to_its_longest() -> None:
    assert spread_window(8_000, 1_000, 30) == 8.0
    assert spread_window(150, 1_000, 30) == pytest.approx(0.15)
    assert spread_window(100_000, 1_000, 30) == 30
    assert spread_window(10, 0, 30) == 30  # no rate to pace by: the longest window
    assert spread(0, 5, random.random) == [] and spread(3, 0, random.random) == [0, 0, 0]
