"""Record how long each test module took in a whole run, for the order pytest-xdist hands modules out in.

    python3 -m pytest -n auto --junitxml=run.xml
    python3 -m tools.durations run.xml        # writes tests/durations.json

A module's time is the sum of its tests' (setup, call and teardown, as pytest's JUnit XML counts them), rounded to
the second: the order only needs the long ones told apart from the short.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

# tests/tiers.py reads it (the tools import nothing from the tests).
DURATIONS = Path(__file__).resolve().parents[1] / "tests" / "durations.json"


def module_seconds(junit_xml: Path) -> dict[str, float]:
    """Seconds per test module (`tests/unit/test_x.py`), from a JUnit XML report's testcases."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        module = case.get("classname", "")
        # classname is "tests.unit.test_x" or "tests.unit.test_x.TestClass": the module is the part up to test_*.
        parts = module.split(".")
        cut = next((i for i, part in enumerate(parts) if part.startswith("test_")), len(parts) - 1)
        seconds["/".join(parts[: cut + 1]) + ".py"] += float(case.get("time", 0) or 0)
    return {module: round(total) for module, total in sorted(seconds.items())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    seconds = module_seconds(Path(argv[0]))
    DURATIONS.write_text(json.dumps(seconds, indent=1) + "\n")
    print(f"{len(seconds)} modules, {sum(seconds.values()):.0f} s in all, written to {DURATIONS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
