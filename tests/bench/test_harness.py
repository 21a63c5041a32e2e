"""The load-benchmark harness at its `--quick` sizes: a test of the harness and of correctness, not of speed.

It starts every system itself (the gateway's relay and node, the raw-write floor, Node ws, socket.io with its
Redis adapter, python-socketio, Starlette with broadcaster on Redis and, in steady and burst, on PostgreSQL's
NOTIFY), feeds them the same committed changes, and must end with every gateway subscriber holding exactly the
database's state. No timing is asserted here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

FIGURES = (
    "cpu_us_per_frame",
    "cpu_us_per_delta",
    "rss_kb_per_conn",
    "p50_ms",
    "p99_ms",
    "frames",
    "deltas",
    "lost",
    "stale",
)
ROOT = Path(__file__).resolve().parents[2]


def run_quick(scenario: str, out: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """`python -m bench <scenario> --quick [options]`, on the tests' PostgreSQL when they were given one."""
    env = {**os.environ}
    if os.environ.get("TEST_DATABASE_URL"):
        env["BENCH_DATABASE_URL"] = os.environ["TEST_DATABASE_URL"]
    done = subprocess.run(
        [sys.executable, "-m", "bench", scenario, "--quick", "--out", str(out), *options],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_fanout_quick_measures_every_system_and_the_gateway_ends_at_the_database(tmp_path: Path) -> None:
    done = run_quick("fanout", tmp_path)
    record = json.loads((tmp_path / "fanout.json").read_text())
    systems = record["systems"]
    assert set(systems) == {
        "gateway",
        "gateway-deflate",
        "floor",
        "node-ws",
        "node-ws-deflate",
        "socket.io",
        "python-socketio",
        "broadcaster",
    }
    for name, figures in systems.items():
        assert all(key in figures for key in FIGURES), name
        assert figures["deltas"] > 0, f"{name} delivered nothing"
    for name, figures in systems.items():  # compressing subscribers end at the database's state too
        assert figures["correct"] and figures["lost"] == 0 and figures["stale"] == 0, name
        assert figures["checked"] == figures["subscribers"], name
    # Every system sends each new subscriber the channel's state, the peers as many bytes as the gateway's snapshot.
    snapshot = systems["gateway"]["connect_kb_per_sub"]
    for name in ("floor", "node-ws", "socket.io", "python-socketio", "broadcaster"):
        assert abs(systems[name]["connect_kb_per_sub"] / snapshot - 1) < 0.05, (
            name,
            systems[name]["connect_kb_per_sub"],
        )
    assert (tmp_path / "fanout.png").stat().st_size > 10_000
    table = (tmp_path / "fanout.md").read_text()
    assert "| gateway |" in table and "×" in table  # every figure as a ratio to the best peer
    assert "live in" in done.stdout  # it shows progress while it runs


@pytest.mark.parametrize("scenario", ["steady", "burst", "storm"])
def test_every_scenario_runs_quick_and_the_gateway_ends_at_the_database(scenario: str, tmp_path: Path) -> None:
    run_quick(scenario, tmp_path)
    systems = json.loads((tmp_path / f"{scenario}.json").read_text())["systems"]
    db_fed = {"broadcaster-pg"} if scenario in ("steady", "burst") else set()  # its trigger only where it is measured
    deflate = {"gateway-deflate"} if scenario in ("steady", "burst") else set()  # subscribers as browsers are
    assert set(systems) == {"gateway", "socket.io", "python-socketio", "broadcaster"} | db_fed | deflate
    for name, figures in systems.items():
        assert all(key in figures for key in FIGURES), name
    for name in {"gateway"} | deflate:  # compressing subscribers end at the database's state too
        assert systems[name]["correct"] and systems[name]["lost"] == 0 and systems[name]["stale"] == 0, name
    gateway = systems["gateway"]
    for name in db_fed:  # fed by PostgreSQL's NOTIFY, it ends at the database's jobs and team counts too
        assert systems[name]["correct"], name
    if scenario == "burst":  # far fewer frames than job changes on the trajectory channel
        for name in {"gateway"} | deflate:
            assert systems[name]["trajectory_frames"] * 20 <= systems[name]["changes"], name
    if scenario == "storm":  # every client resumed from its cursor: current again without a resync
        assert gateway["recovery_s"] is not None and gateway["storm_resyncs"] == 0
        # The node's /healthz, polled from a process of its own through the storm, answered every time.
        health = gateway["healthz"]
        assert health["polls"] >= 10 and health["failed"] == 0 and health["p99_ms"] is not None, health
        assert "/healthz" in (tmp_path / "storm.md").read_text()
        assert gateway["loop_lag"]["ticks"] >= 20  # its event loop's lag, from its /metrics, over the storm
