"""The package's modules import each other without a circle: each room can be read, tested and moved from the
bottom up. An import only for type checking (under `if TYPE_CHECKING:`) is an arrow too: a room that names
another's types depends on it (what it needs of a caller is a Protocol of its own, as gateway.sim.commands has)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gateway"
PACKAGES = ("gateway", "bench", "harness", "tools")  # the product and what measures and drives it


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules `path` imports: at its top, inside a function, or for type checking only."""
    here = _name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found: set[str] = set()
    todo: list[ast.AST] = [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for candidate in [module, *(f"{module}.{a.name}" for a in node.names)]:
                # A module's own packages are imported before it whatever it imports: no arrow up to them.
                if candidate in modules and candidate != here and not here.startswith(candidate + "."):
                    found.add(candidate)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in modules and a.name != here}
        todo.extend(ast.iter_child_nodes(node))
    return found


def _circles(package: Path = PACKAGE) -> list[list[str]]:
    paths = {_name(p): p for p in package.rglob("*.py") if "node_modules" not in p.parts}
    graph = {name: _imports(path, set(paths)) for name, path in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return circles


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_imports_itself_round_a_circle(package: str) -> None:
    assert _circles(ROOT / package) == []
