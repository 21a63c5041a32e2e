"""No module runs over 450 lines (issue #52, "The house"): past that, a module is holding more than one concept,
and it is split by what its parts are about (as `web/operations/`, `core/batching.py`, `bench/faults/` and
`bench/scenarios/` were). The rule holds for the product and for what measures and drives it."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = ("gateway", "bench", "harness", "tools")
MAX_LINES = 450


@pytest.mark.parametrize("tree", TREES)
def test_no_module_is_over_450_lines(tree: str) -> None:
    over = {
        path.relative_to(ROOT).as_posix(): lines
        for path in sorted((ROOT / tree).rglob("*.py"))
        if "node_modules" not in path.parts and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert over == {}, f"modules over {MAX_LINES} lines (split them by what their parts are about): {over}"
