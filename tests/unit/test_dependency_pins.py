"""The libraries the gateway is built on, on their public seams only: no module of the package imports a private
module or name of websockets, httptools or Starlette, nor anything of uvicorn (the node owns its socket layer,
gateway.web.server), so neither websockets nor uvicorn needs an upper bound; redis-py keeps its pin (cluster
mode's sharded pub/sub is tested with 8.x)."""

from __future__ import annotations

import ast
import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gateway"
PINNED = ["redis"]  # gateway.bus
UNBOUNDED = ["websockets", "httptools", "starlette"]  # the socket layer's: public names only
WATCHED = ("websockets", "httptools", "starlette", "uvicorn")


def pins() -> dict[str, Requirement]:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {r.name: r for r in map(Requirement, dependencies)}


@pytest.mark.parametrize("name", PINNED)
def test_the_installed_version_is_inside_the_pinned_range(name: str) -> None:
    requirement = pins()[name]
    installed = Version(importlib.metadata.version(name))
    assert any(spec.operator == "<" for spec in requirement.specifier), f"{name}: pin an upper bound in pyproject.toml"
    assert requirement.specifier.contains(installed, prereleases=True), (
        f"{name} {installed} is outside the range pyproject.toml pins ({requirement.specifier})"
    )


@pytest.mark.parametrize("name", UNBOUNDED)
def test_the_socket_layers_libraries_have_no_upper_bound(name: str) -> None:
    requirement = pins()[name]
    assert not any(spec.operator in ("<", "<=", "==", "~=") for spec in requirement.specifier), (
        f"{name} is capped in pyproject.toml ({requirement.specifier}): the gateway uses its public API only"
    )


def test_uvicorn_is_no_runtime_dependency() -> None:
    assert "uvicorn" not in pins(), "uvicorn is back in the runtime dependencies: gateway.web.server serves the node"


def _imports(path: Path) -> list[str]:
    """Every dotted name `path` imports from the watched libraries (`module` or `module.name`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module.split(".")[0] in WATCHED:
                found += [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if alias.name.split(".")[0] in WATCHED]
    return found


def test_no_module_imports_a_private_name_or_uvicorn() -> None:
    offending = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in _imports(path):
            if name.startswith("uvicorn") or any(part.startswith("_") for part in name.split(".")):
                offending.append(f"{path.relative_to(ROOT)}: {name}")
    assert offending == [], offending


def test_websockets_c_apply_mask_is_there_and_unmasks() -> None:
    from websockets.speedups import apply_mask  # gateway.core.wsframe falls back to Python's, many times slower

    from gateway.core import wsframe

    assert wsframe.apply_mask is apply_mask
    assert apply_mask(bytes([1, 2, 3, 4, 5]), bytes([1, 2, 3, 4])) == bytes([0, 0, 0, 0, 4])
