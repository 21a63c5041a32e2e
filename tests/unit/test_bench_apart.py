"""bench/ stands apart (issue #52): it reaches the gateway and its libraries only through their public names, so a
refactoring of the gateway that keeps its public names cannot break a benchmark unseen; and it takes a new dialect
or scenario by adding one: its module or function, and a line in `DIALECTS` or `SCENARIOS`, every scenario run by
the one path of `python -m bench`; its SQL is in one module, bench/sql.py. (That bench/ imports nothing from tests/
is held in test_tiers.py.)"""

from __future__ import annotations

import ast
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import __main__ as command
from bench import registry
from bench.registry import SCENARIOS, Options, Scenario
from bench.scenarios import Run
from bench.subscribers import Stats
from bench.subscribers.dialects import DIALECTS, Dialect, Resuming, make_dialect
from bench.systems import BASELINES, COMPRESSED, DB_FED, PEER_NAMES, SYSTEMS, WORKERS

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


def test_a_peer_is_its_entry_in_systems_and_its_group() -> None:
    """A new peer is a program in bench/peers/ and its entry in SYSTEMS, named in the group that says which
    scenarios compare it; it speaks a registered dialect."""
    groups = [["gateway"], PEER_NAMES, DB_FED, BASELINES, COMPRESSED, WORKERS]
    assert sorted(name for group in groups for name in group) == sorted(SYSTEMS)
    assert {name: system.dialect for name, system in SYSTEMS.items() if system.dialect not in DIALECTS} == {}
    assert all(system.name == name for name, system in SYSTEMS.items())


def test_every_scenario_is_registered() -> None:
    """The shared world's scenarios (each a function of a bench/scenarios/ module taking the world's `ctx`) and
    the two that start worlds of their own."""
    measures = {
        node.name
        for module in (BENCH / "scenarios").glob("*.py")
        for node in ast.parse(module.read_text()).body
        if isinstance(node, ast.AsyncFunctionDef) and node.args.args and node.args.args[0].arg == "ctx"
    }
    assert measures == {"fanout", "storm", "steady", "burst"}
    assert set(SCENARIOS) == measures | {"faults", "deploy"}


def test_the_command_has_no_special_case_of_a_scenario() -> None:
    """bench/__main__.py compares the scenario's name with nothing: what differs between scenarios is their entry."""
    compared = [
        ast.unparse(node)
        for node in ast.walk(ast.parse((BENCH / "__main__.py").read_text()))
        if isinstance(node, ast.Compare)
        for constant in ast.walk(node)
        if isinstance(constant, ast.Constant) and constant.value in SCENARIOS
    ]
    assert compared == []


def _scenario(record: dict[str, Any], ran: list[Options]) -> Scenario:
    async def measure(options: Options, say: Any) -> Run:
        ran.append(options)
        say("measured")
        return Run(dict(record), tables=["### a table\n"])

    return Scenario(
        measure,
        lambda record: None if record["correct"] else "the gateway was wrong",
        registry._as_own(lambda record: f"correct: {record['correct']}\n"),
        frozenset({"subscribers"}),
    )


def test_a_new_scenario_runs_through_the_one_path_of_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[Options] = []
    monkeypatch.setitem(SCENARIOS, "tiny", _scenario({"scenario": "tiny", "correct": True}, ran))
    monkeypatch.setattr(sys, "argv", ["bench", "tiny", "--quick", "--subscribers", "7", "--out", str(tmp_path)])
    command.main()
    assert ran == [Options(tmp_path, quick=True, subscribers=7)]
    record = json.loads((tmp_path / "tiny.json").read_text())
    assert record["command"] == f"python -m bench tiny --quick --subscribers 7 --out {tmp_path}"
    assert set(record["machine"]) == {"cpus", "python", "platform"}
    assert (tmp_path / "tiny.md").read_text() == "correct: True\n"
    assert "measured" in capsys.readouterr().out


def test_a_scenario_refuses_the_options_it_does_not_take_and_its_failure_fails_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(SCENARIOS, "tiny", _scenario({"scenario": "tiny", "correct": False}, []))
    for option in (["--rounds", "2"], ["--sizes", "100"], ["--systems", "gateway"]):
        monkeypatch.setattr(sys, "argv", ["bench", "tiny", *option, "--out", str(tmp_path)])
        with pytest.raises(SystemExit) as refused:
            command.main()
        assert refused.value.code == 2, option
        assert f"{option[0]} " in capsys.readouterr().err
    monkeypatch.setattr(sys, "argv", ["bench", "tiny", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as failed:
        command.main()
    assert failed.value.code == "bench: the gateway was wrong"


# How a statement (or a piece of one) starts: what PostgreSQL is sent, never prose.
_STATEMENT = re.compile(
    r"^\s*(select\s|insert\s+into\s|update\s+\w+\s|delete\s+from\s|with\s+\w+\s+as\s*\(|returning\s"
    r"|(create|drop)\s+(database|table|index|or\s+replace|function|trigger)\b|alter\s+table\s|truncate\s"
    r"|explain\s*\(|analyze\s+\w|vacuum\b|show\s+\w+$)",
    re.IGNORECASE,
)


def _statements(source: str) -> list[str]:
    """The strings of `source` (f-strings with their holes as {}) that are SQL, docstrings left out."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            skipped.add(id(body[0].value))
        if isinstance(node, ast.JoinedStr):
            skipped |= {id(value) for value in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            text = node.value
        else:
            continue
        if _STATEMENT.match(text):
            found.append(" ".join(text.split())[:80])
    return found


def test_the_benchmarks_sql_is_in_one_module() -> None:
    """bench/sql.py names every statement; the peers' own SQL (a NOTIFY trigger) is part of the system compared."""
    found = {}
    for path in _modules():
        name = path.relative_to(ROOT).as_posix()
        if name == "bench/sql.py" or name.startswith("bench/peers/"):
            continue
        if statements := _statements(path.read_text()):
            found[name] = statements
    assert found == {}
    assert len(_statements((BENCH / "sql.py").read_text())) > 40


def test_the_sql_rule_sees_statements_and_leaves_prose() -> None:
    source = (
        '"""Select the jobs: update them."""\n'
        'A = "select id from jobs where team_id = $1"\n'
        "B = f'drop database if exists \"{name}\"'\n"
        'C = " returning j.id"\n'
        'D = "with locked as (select id from jobs)"\n'
        'E = "vacuumed"\n'
        'F = "show autovacuum"\n'
        'G = "selected rows: update me"\n'
    )
    assert _statements(source) == [
        "select id from jobs where team_id = $1",
        'drop database if exists "{}"',
        "returning j.id",
        "with locked as (select id from jobs)",
        "show autovacuum",
    ]
