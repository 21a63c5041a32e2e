"""The reference pages say what the code does now: README's settings table lists every variable gateway/config.py
reads, none the package does not know, and config.py's numeric defaults, docs/cli.md lists every subcommand the
parser takes, docs/metrics.md every `gateway_*` family the package exports, no page cites a file the repository
lacks, and the manual's index (docs/README.md) lists every page and points only to sections that exist."""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from gateway import config
from gateway.cli import parser

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gateway"
DOCS = ROOT / "docs"
ENV_NAME = re.compile(r"^(?:GATEWAY_[A-Z0-9_]+|DATABASE_URL|REDIS_URL|OTEL_[A-Z0-9_]+)$")


class _Recorder(dict[str, str]):
    """An empty environment that remembers every name asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def get(self, name: str, default: object = None) -> object:  # type: ignore[override]
        self.asked.add(name)
        return default

    def __getitem__(self, name: str) -> str:
        self.asked.add(name)
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        self.asked.add(str(name))
        return False


def _read_by_config(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """The variables Settings() reads, asked of config.py itself rather than parsed from it."""
    recorder = _Recorder()
    monkeypatch.setattr(config, "os", SimpleNamespace(environ=recorder))
    config.Settings()
    return recorder.asked


def _known_to_package() -> set[str]:
    """Every variable name the package spells out (config.py, the commands, tracing, the build's commit)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and ENV_NAME.match(node.value):
                names.add(node.value)
    return names


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else None]


def _first_cells(table: str) -> list[str]:
    return [line.split("|")[1] for line in table.splitlines() if line.startswith("| ") and not line.startswith("|---")]


def _documented_settings() -> set[str]:
    table = _section((ROOT / "README.md").read_text(), "## Configuration")
    return {name for cell in _first_cells(table) for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)}


def test_every_setting_config_reads_is_in_the_readme(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = sorted(_read_by_config(monkeypatch) - _documented_settings())
    assert missing == [], f"config.py reads these, README's Configuration table does not list them: {missing}"


def test_the_readme_lists_no_setting_the_package_does_not_read() -> None:
    unknown = sorted(_documented_settings() - _known_to_package())
    assert unknown == [], f"README's Configuration table lists settings nothing in gateway/ reads: {unknown}"


def _subcommands(help_text: str, metavar: str) -> list[str]:
    """The subcommands argparse's help lists under COMMAND (or ACTION), as a user sees them."""
    lines = help_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == metavar)
    names = []
    for line in lines[start + 1 :]:
        if not line.strip() or not line.startswith("    "):
            break
        if not line.startswith("     "):  # a continued help line is indented further
            names.append(line.split()[0])
    return names


def _help(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """What `gateway ARGS --help` prints."""
    with pytest.raises(SystemExit):
        parser().parse_args([*args, "--help"])
    return capsys.readouterr().out


def _parser_commands(capsys: pytest.CaptureFixture[str]) -> set[str]:
    commands = set()
    for name in _subcommands(_help([], capsys), "COMMAND"):
        sub_help = _help([name], capsys)
        if "\n  ACTION\n" in sub_help:
            commands |= {f"{name} {action}" for action in _subcommands(sub_help, "ACTION")}
        else:
            commands.add(name)
    return commands


def _documented_commands() -> set[str]:
    table = (DOCS / "cli.md").read_text().split("## Exit statuses")[0]
    return {m for cell in _first_cells(table) for m in re.findall(r"`gateway ([a-z -]+)`", cell)}


def test_docs_cli_lists_every_subcommand_and_no_other(capsys: pytest.CaptureFixture[str]) -> None:
    parsed, documented = _parser_commands(capsys), _documented_commands()
    assert len(parsed) > 10, "the subcommands were not found in `gateway --help`"
    assert sorted(parsed - documented) == [], "docs/cli.md does not list these subcommands"
    assert sorted(documented - parsed) == [], "docs/cli.md lists subcommands `gateway` does not take"


def _exported_families() -> set[str]:
    """The `gateway_*` families the package builds, named as the exposition shows them (counters with _total)."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
                continue
            kind = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            if kind.endswith("MetricFamily") and str(node.args[0].value).startswith("gateway_"):
                suffix = "_total" if kind == "CounterMetricFamily" else ""
                names.add(f"{node.args[0].value}{suffix}")
    return names


def _documented_metrics() -> set[str]:
    tables = "\n".join(
        line for line in (DOCS / "metrics.md").read_text().splitlines() if line.startswith("| `gateway_")
    )
    return {re.match(r"\| `(gateway_[a-z_]+)", line).group(1) for line in tables.splitlines()}  # type: ignore[union-attr]


def test_docs_metrics_lists_every_family_and_no_other() -> None:
    exported, documented = _exported_families(), _documented_metrics()
    assert len(exported) > 30, "the metric families were not found where the test looks for them"
    assert sorted(exported - documented) == [], "docs/metrics.md does not list these"
    assert sorted(documented - exported) == [], "docs/metrics.md lists figures the package does not export"


def test_no_doc_names_the_design_file_the_repository_never_held() -> None:
    pages = [ROOT / "README.md", *DOCS.glob("*.md")]
    citing = [p.name for p in pages if re.search(r"\bDESIGN\b(?!\.)", p.read_text()) or "DESIGN.md" in p.read_text()]
    assert citing == [], f"these cite DESIGN, which is not in the repository (docs/design.md is): {citing}"


CITED = re.compile(r"(?<![\w./-])((?:[a-z_.]+/)+[\w-]+\.(?:py|md|yml|yaml|json|svg|js|css|html|sql|toml|txt))\b")
RESULTS = re.compile(r"(?<![\w./-])(bench/results/[\w.-]*\d[\w.-]*/)")  # a dated folder


def test_every_file_a_doc_cites_is_in_the_repository() -> None:
    """A path in README or docs/ names a file of the checkout (from its root, gateway/ or docs/): never a dead end."""
    missing = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = page.read_text()
        for cited in set(CITED.findall(text)) | set(RESULTS.findall(text)):
            if not any((base / cited).exists() for base in (ROOT, PACKAGE, DOCS)):
                missing.append(f"{page.name}: {cited}")
    assert sorted(missing) == []


def test_the_manual_lists_every_page_and_the_readme_opens_it() -> None:
    index = (DOCS / "README.md").read_text()
    unlisted = sorted(p.name for p in DOCS.glob("*.md") if p.name != "README.md" and f"]({p.name})" not in index)
    assert unlisted == [], f"docs/README.md does not list these pages: {unlisted}"
    assert "](docs/README.md)" in (ROOT / "README.md").read_text()


def _headings(page: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in page.read_text().splitlines() if line.startswith("## ")]


def test_every_section_the_manual_points_to_exists() -> None:
    """`[page.md](page.md), "Section"` (or "the README's "Section"") names a heading of that page."""
    missing = []
    for source in (DOCS / "README.md", DOCS / "architecture.md"):
        for line in source.read_text().splitlines():
            page = None
            for token in re.finditer(r"\]\(([\w-]+\.md)\)|the README's|\"([^\"]+)\"", line):
                if token.group(1):
                    page = DOCS / token.group(1)
                elif token.group(0) == "the README's":
                    page = ROOT / "README.md"
                elif page is not None and token.group(2)[0].isupper():
                    if not any(h == token.group(2) or h.startswith(token.group(2) + ":") for h in _headings(page)):
                        missing.append(f"{source.name}: {page.name}, {token.group(2)!r}")
    assert missing == []


UNITS = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20}


def _documented_defaults() -> dict[str, float]:
    """The numeric defaults README's table gives (`4 MiB`, `0.5`, `8388608 (8 MiB)`), by variable."""
    table = _section((ROOT / "README.md").read_text(), "## Configuration")
    found = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0]) if len(cells) == 3 else []
        number = re.fullmatch(r"(\d+(?:\.\d+)?)(?: (KiB|MiB))?(?: \(.*\))?", cells[2]) if names else None
        if len(names) == 1 and number:
            found[names[0]] = float(number.group(1)) * UNITS[number.group(2) or ""]
    return found


def test_the_readme_gives_each_numeric_setting_the_default_config_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if ENV_NAME.match(n)]:
        monkeypatch.delenv(name)
    defaults = config.Settings()
    by_variable = {}
    for f in dataclasses.fields(config.Settings):
        recorder = _Recorder()
        with monkeypatch.context() as m:
            m.setattr(config, "os", SimpleNamespace(environ=recorder))
            f.default_factory()  # type: ignore[misc]
        if len(recorder.asked) == 1:
            by_variable[recorder.asked.pop()] = getattr(defaults, f.name)
    documented = _documented_defaults()
    assert len(documented) > 30, "README's numeric defaults were not found"
    wrong = {n: (d, by_variable[n]) for n, d in documented.items() if n in by_variable and d != by_variable[n]}
    assert wrong == {}, "README's default (first) differs from config.py's (second)"


def test_performance_md_is_a_summary_under_300_lines() -> None:
    """performance.md is the summary table, how to reproduce each figure and where the time goes (issue #52): the
    history and the long stories live in dated bench/results/ folders and git."""
    lines = len((DOCS / "performance.md").read_text().splitlines())
    assert lines < 300, f"docs/performance.md has {lines} lines: move detail to bench/results/ or scaling.md"
