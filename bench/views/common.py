"""The benchmark's sizes, targets and paths, which its parts share (bench/views/__init__.py says what each
measures), and the percentile every timing is read with."""

from __future__ import annotations

import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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

TRAJECTORIES = 1_000  # the size
QUICK_TRAJECTORIES = 50
JOBS_PER_TRAJECTORY = 20  # the 2,000 each (2,000,000 jobs) is allowed: --jobs-per-trajectory 2000
TRAJECTORY_JOBS_BATCH = 100_000  # jobs per INSERT statement
TARGET_CARDS_MS = 1_000.0  # first cards after navigation
CARD_PAGE = 100  # the dashboard's page of cards
POP_PAGE = 300  # the popover's page of trajectories
# Streaming: tasks on the newest submissions without any, flipped between running and completed in batches.
STREAM_SUBMISSIONS = 200
STREAM_TASKS_EACH = 10
STREAM_RUNNING = 0.1  # the share of those tasks running at any time (the rest completed)
STREAM_RATE = 1_000  # task changes a second
STREAM_TICK = 0.1  # seconds between batches: STREAM_RATE * STREAM_TICK changes each
STREAM_SECONDS = 10.0
QUICK_STREAM_SECONDS = 3.0
STREAM_SETTLE = 1.0  # at least this long after the last write is watched too (the relay's deltas still arrive)
LONG_TASK_MS = 50.0  # the target: no main-thread task passes it
AFTER_READ_MS = 300  # a long task starting this soon after a window read was answered is counted as its drawing


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile (q in 0..100)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]
