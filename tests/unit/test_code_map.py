"""docs/operations.md's map of the code names every module of the package, in its room: a module added or
moved without a line there is a reader's dead end."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gateway"


def _mapped() -> set[str]:
    """Paths under gateway/ the map's table names: `name.py` in a room's row, or a sub-package `name/`."""
    text = (ROOT / "docs" / "operations.md").read_text()
    table = text[text.index("## The code") :]
    named: set[str] = set()
    room = ""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3 or set(cells[0]) <= {"-"} and cells[0]:
            continue
        first = re.match(r"`(\w+)/`", cells[0])
        if first:
            room = first.group(1) + "/"
        elif cells[0] == "elsewhere":
            room = ""
        elif cells[0] == "room":
            continue
        for name in re.findall(r"`(\w+(?:\.py|/))`", cells[1]):
            named.add(room + name)
    return named


def _modules() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        found.append(path.relative_to(PACKAGE).as_posix())
    return found


def test_every_module_is_on_the_map() -> None:
    named = _mapped()
    missing = [
        module
        for module in _modules()
        if module not in named and not any(module.startswith(n) for n in named if n.endswith("/"))
    ]
    assert missing == [], f"not in docs/operations.md's map of the code: {missing}"


def test_the_map_names_no_module_that_is_gone() -> None:
    gone = [n for n in _mapped() if n.endswith(".py") and not (PACKAGE / n).is_file()]
    assert gone == [], f"docs/operations.md's map names modules that do not exist: {gone}"
