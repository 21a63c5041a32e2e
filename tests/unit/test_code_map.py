"""docs/code.md's map of the code names every module of the package, in its room: a module added or
moved without a line there is a reader's dead end."""

from __future__ import annotations

from pathlib import Path

from harness import code_map

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gateway"


def _mapped() -> set[str]:
    """Paths under gateway/ the map's table names: `name.py` in a room's row, or a sub-package `name/`."""
    return {room + name for room, names in code_map.rooms().items() for name in names}


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
    assert missing == [], f"not in docs/code.md's map of the code: {missing}"


def test_the_map_names_no_module_that_is_gone() -> None:
    gone = [n for n in _mapped() if n.endswith(".py") and not (PACKAGE / n).is_file()]
    assert gone == [], f"docs/code.md's map names modules that do not exist: {gone}"


def test_the_readmes_picture_is_drawn_from_the_map_as_it_is() -> None:
    """docs/rooms.svg is what harness/code_map.py draws from the map now: a room or module added to the map and
    not to the picture fails here (run `python -m harness.code_map`)."""
    assert code_map.SVG.read_text() == code_map.draw(code_map.rooms()), "run: python -m harness.code_map"
