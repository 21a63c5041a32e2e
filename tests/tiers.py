"""The suite's tiers, by where a test lives: one marker each, so a developer runs the tier their change needs.

- `fast`: tests/unit (pure code, the memory broker's contract, the rules' shared vectors), no server started;
  the inner loop: `python3 -m pytest -m fast` (about a minute on two cores).
- `integration`: tests/integration against a real PostgreSQL and Redis, nodes started in-process or one at a time.
- `world`: the modules that start worlds of real processes (faults, failover, deploys, storms, the wheel, the image,
  the demo) and the benchmark harness's runs: minutes each.
- `browser`: tests/browser, real Chromium against a running stack.

README's test command runs every tier, and CI runs it.
"""

from __future__ import annotations

import json
from pathlib import Path

TIERS = ("fast", "integration", "world", "browser")

# Integration modules whose tests start several processes (nodes, relays, HAProxy, Redis replicas, a demo, a venv).
WORLDS = frozenset(
    {
        "test_nothing_lost.py",
        "test_faults_under_load.py",
        "test_rolling_deploy.py",
        "test_redis_failover.py",
        "test_redis_sentinel.py",
        "test_redis_cluster.py",
        "test_postgres_restart.py",
        "test_drain.py",
        "test_workers.py",
        "test_demo.py",
        "test_provision.py",
        "test_image.py",
        "test_wheel.py",
        "test_kubernetes_node.py",
    }
)


def tier_of(path: Path) -> str:
    """The tier of the test module at `path` (a path under tests/)."""
    parts = path.parts
    if "browser" in parts:
        return "browser"
    if "bench" in parts or path.name in WORLDS:
        return "world"
    if "unit" in parts:
        return "fast"
    return "integration"


# Seconds each module took in a recorded whole run (`python -m tools.durations junit.xml` writes the file); a module
# the record lacks is given its tier's guess, so a new world still starts early.
DURATIONS = Path(__file__).with_name("durations.json")
GUESS = {"world": 300.0, "browser": 60.0, "integration": 10.0, "fast": 1.0}


def recorded_durations() -> dict[str, float]:
    try:
        return {str(key): float(value) for key, value in json.loads(DURATIONS.read_text()).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def longest_first(paths: list[Path], root: Path) -> dict[Path, float]:
    """Each module's expected seconds, from the record or its tier's guess: the order in which pytest-xdist hands
    the modules out (each stays on one worker), so the longest do not start last and hold the end."""
    recorded = recorded_durations()
    expected = {}
    for path in paths:
        name = path.relative_to(root).as_posix()
        expected[path] = recorded.get(name, GUESS[tier_of(path)])
    return expected
