"""The house's rules, read from the source: asyncpg is named only in `gateway/store/` (everyone else holds the
store's names for a pool and a connection, `store.types.Pool` and `store.types.Connection`), and no function in
`gateway/` runs over 80 lines."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "gateway"


def _imported(tree: ast.AST) -> set[str]:
    """The top-level packages a module imports, at its top, inside a function or for type checking only."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_asyncpg_is_imported_only_in_the_store() -> None:
    outside = [
        str(path.relative_to(PACKAGE.parent))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "store" not in path.relative_to(PACKAGE).parts[:1] and "asyncpg" in _imported(ast.parse(path.read_text()))
    ]
    assert outside == []


def test_no_function_is_over_80_lines() -> None:
    """A function longer than a screen is split into named parts (its decorators not counted)."""
    long = [
        f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > 80
    ]
    assert long == []
