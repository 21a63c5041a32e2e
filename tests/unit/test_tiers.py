"""The tiers name real modules, and each holds tests: a renamed world would silently join the integration tier."""

from __future__ import annotations

from pathlib import Path

from tests.tiers import WORLDS, tier_of

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
