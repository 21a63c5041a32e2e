"""No module of the package runs over 450 lines (issue #52, "The house"): past that, a module is holding more than
one concept, and it is split by what its parts are about (as `web/operations/` and `core/batching.py` were)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gateway"
MAX_LINES = 450


def test_no_module_of_the_gateway_is_over_450_lines() -> None:
    over = {
        path.relative_to(PACKAGE).as_posix(): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert over == {}, f"modules over {MAX_LINES} lines (split them by what their parts are about): {over}"
