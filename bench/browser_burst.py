"""How long the browser's main thread is busy while a big trajectory's panel takes a burst (for docs/performance.md).

    python -m bench.browser_burst [--rounds 3]

Each round runs the browser test `test_big_trajectory_stays_small_in_the_dom_and_draws_once_a_frame` (real
Chromium, a real node and relay, 30,000 jobs in one trajectory, then about 5,000 updates a second for three
seconds) and reads the long tasks (over 50 ms, the browser's own PerformanceObserver) it prints. The test asserts
what does not depend on the machine (the DOM stays small, one draw per animation frame); how long a task takes
does, so it is measured here, round after round, and reported with its spread. Needs Debian's Chromium.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEST = "tests/browser/test_app.py::test_big_trajectory_stays_small_in_the_dom_and_draws_once_a_frame"
PRINTED = re.compile(r"long tasks during the burst: (\[[^\]]*\]) ms")


def one_round() -> list[float]:
    """The longest tasks (ms, longest first) of one run of the burst; [] when none passed 50 ms."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", TEST, "-s", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    found = PRINTED.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the browser burst did not run:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return [float(d) for d in ast.literal_eval(found[1])]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.browser_burst", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="how many runs of the burst (default: %(default)s)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"), help="folder for browser_burst.json")
    args = parser.parse_args()
    rounds = []
    for i in range(args.rounds):
        tasks = one_round()
        rounds.append(tasks)
        print(f"round {i + 1}: {len(tasks)} long task(s), longest {max(tasks, default=0):.0f} ms", flush=True)
    longest = sorted(max(r, default=0.0) for r in rounds)
    record = {"rounds": rounds, "longest_ms": longest, "median_longest_ms": longest[len(longest) // 2]}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "browser_burst.json").write_text(json.dumps(record, indent=2) + "\n")
    print(f"longest main-thread task per round: {longest} ms (median {record['median_longest_ms']:.0f} ms)")


if __name__ == "__main__":
    main()
