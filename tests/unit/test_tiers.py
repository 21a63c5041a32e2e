"""The tiers name real modules, and each holds tests: a renamed world would silently join the integration tier."""

from __future__ import annotations

from pathlib import Path

from tests.tiers import GUESS, WORLDS, longest_first, recorded_durations, tier_of
from tools.durations import module_seconds

TESTS = Path(__file__).resolve().parents[1]


def test_every_world_named_is_a_module_of_the_integration_tests() -> None:
    missing = sorted(name for name in WORLDS if not (TESTS / "integration" / name).is_file())
    assert missing == []


def test_each_folder_has_its_tier() -> None:
    assert tier_of(TESTS / "unit" / "test_cli.py") == "fast"
    assert tier_of(TESTS / "integration" / "test_ingest.py") == "integration"
    assert tier_of(TESTS / "integration" / "test_nothing_lost.py") == "world"
    assert tier_of(TESTS / "bench" / "test_load.py") == "world"
    assert tier_of(TESTS / "browser" / "test_calm.py") == "browser"


def test_the_benchmark_and_the_tools_import_nothing_from_the_tests() -> None:
    """What they share with the tests lives in harness/: bench/ and tools/ run without the tests' fixtures."""
    root = TESTS.parent
    found = [
        f"{path.relative_to(root)}:{n}"
        for folder in ("bench", "harness", "tools")
        for path in (root / folder).rglob("*.py")
        if "node_modules" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if line.strip().startswith(("from tests", "import tests"))
    ]
    assert found == []


def test_modules_go_longest_first_by_the_record_and_a_new_world_early(tmp_path: Path) -> None:
    """The order pytest-xdist hands modules out in: a recorded module by its seconds, one the record lacks by its
    tier's guess, so a new world is not left to start last."""
    recorded = recorded_durations()
    known = [TESTS.parent / name for name in sorted(recorded)][:3]
    new_world = TESTS / "integration" / "test_nothing_lost.py"
    new_unit = TESTS / "unit" / "test_not_recorded_anywhere.py"
    expected = longest_first([*known, new_world, new_unit], TESTS.parent)
    for path in known:
        assert expected[path] == recorded[path.relative_to(TESTS.parent).as_posix()]
    assert expected[new_unit] == GUESS["fast"]
    assert expected[new_world] >= GUESS["fast"]


def test_the_record_names_modules_that_exist() -> None:
    """tests/durations.json holds modules of this suite (a renamed module falls back to its tier's guess)."""
    recorded = recorded_durations()
    assert recorded, "tests/durations.json is missing or empty: python -m tools.durations <junit.xml> writes it"
    assert sorted(name for name in recorded if not (TESTS.parent / name).is_file()) == []


def test_a_junit_report_sums_seconds_per_module(tmp_path: Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.unit.test_a" name="t1" time="1.4"/>'
        '<testcase classname="tests.unit.test_a" name="t2" time="2.2"/>'
        '<testcase classname="tests.browser.test_b.TestPanel" name="t3" time="30.0"/>'
        "</testsuite></testsuites>"
    )
    assert module_seconds(report) == {"tests/browser/test_b.py": 30, "tests/unit/test_a.py": 4}
