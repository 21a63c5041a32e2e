"""bench/ stands apart (issue #52): it reaches the gateway and its libraries only through their public names, so a
refactoring of the gateway that keeps its public names cannot break a benchmark unseen; and it takes a new dialect
by adding one: its module, and a line in `DIALECTS`. (That bench/ imports nothing from tests/ is held in
test_tiers.py.)"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from bench.subscribers import Stats
from bench.subscribers.dialects import DIALECTS, Dialect, Resuming, make_dialect

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"

# A peer is another project's program, written as its authors would; one that patches its library's bugs reaches
# into that library (the peer's own dependency, not the gateway's), and says so in its docstring.
PEER_PATCHES = {"bench/peers/broadcaster_app.py": "broadcaster"}


def _modules() -> list[Path]:
    return [p for p in sorted(BENCH.rglob("*.py")) if "node_modules" not in p.parts and "results" not in p.parts]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_names(source: str, allowed: str | None = None) -> list[str]:
    """Where `source` names something private of another module: `x._name` on anything but self or cls, `from m
    import _name`, or an import of a module `_m` (of the package `allowed` excepted)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if allowed is not None and module.split(".")[0] == allowed:
                continue
            names = [a.name for a in node.names if _private(a.name)]
            if any(_private(part) for part in module.split(".")) or names:
                found.append(f"from {'.' * node.level}{module} import {', '.join(names) or '...'}")
        elif isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if any(map(_private, a.name.split(".")))]
    return sorted(found)


def test_the_benchmark_names_nothing_private_of_the_gateway_or_its_libraries() -> None:
    """Where a benchmark needs a part of the gateway, the gateway names it publicly (`Hub.deliver`,
    `Publisher.calls`, `submission_rows.window_statements`, `EmbeddedValkey.pids`), or it measures from outside."""
    found = {}
    for path in _modules():
        name = path.relative_to(ROOT).as_posix()
        if names := _private_names(path.read_text(), PEER_PATCHES.get(name)):
            found[name] = names
    assert found == {}


def test_the_rule_sees_each_way_of_naming_a_private_name() -> None:
    source = (
        "from gateway.store.submission_rows import _where\n"
        "from redis._parsers.encoders import Encoder\n"
        "import redis._parsers\n"
        "from . import __doc__\n"
        "def f(hub, self):\n"
        "    self._ok = hub._deliver\n"
    )
    assert _private_names(source) == [
        "from gateway.store.submission_rows import _where",
        "from redis._parsers.encoders import ...",
        "hub._deliver",
        "import redis._parsers",
    ]
    assert _private_names("from broadcaster._base import Subscriber\n", allowed="broadcaster") == []


def _protocol_methods(protocol: type) -> dict[str, list[str]]:
    """The protocol's own methods (properties are attributes here), each with its parameters after self."""
    return {
        name: list(inspect.signature(member).parameters)[1:]
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_every_registered_dialect_has_what_a_subscriber_asks_of_it(name: str) -> None:
    dialect = make_dialect(name, ["team:1", "trajectory:2"], Stats(), await_state=True)
    assert isinstance(dialect, Dialect)
    for method, parameters in _protocol_methods(Dialect).items():
        assert list(inspect.signature(getattr(dialect, method)).parameters) == parameters, (name, method)
    assert isinstance(dialect.headers, list) and dialect.stats is not None
    assert set(dialect.states()) == {"team:1", "trajectory:2"} and not dialect.ready()  # nothing has arrived yet
    if name.startswith("gateway"):  # the faults and deploy scenarios follow the gateway's subscribers by cursor
        assert isinstance(dialect, Resuming)
        for method, parameters in _protocol_methods(Resuming).items():
            assert list(inspect.signature(getattr(dialect, method)).parameters) == parameters, (name, method)


def test_every_dialect_class_is_registered() -> None:
    """A dialect written but not registered could not be run: `python -m bench` reaches dialects by name only."""
    registered = {type(make(["team:1"], Stats(), False)).__name__ for make in DIALECTS.values()}
    written = {
        node.name
        for path in sorted((BENCH / "subscribers").glob("*.py"))
        if path.name != "dialects.py"
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef) and node.name.endswith("Dialect")
    }
    assert written == registered


def test_an_unknown_dialect_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown dialect 'mqtt': one of gateway, gateway-msgpack, plain, socketio"):
        make_dialect("mqtt", ["team:1"], Stats())
