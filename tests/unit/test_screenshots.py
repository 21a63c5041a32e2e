"""README's screenshots show the frontend of this checkout: docs/screenshots/SOURCE records the hash of the
frontend files they were made from (`python -m tools.screenshots` writes both)."""

from __future__ import annotations

from pathlib import Path

from tools.screenshots import COMMAND, OUT, frontend_files, frontend_hash, recorded_hash, source_text

PICTURES = ("popover.png", "panel.png", "analyses.png", "submissions.png", "narrow.png")


def test_the_screenshots_were_made_from_the_current_frontend() -> None:
    recorded = recorded_hash()
    assert recorded == frontend_hash(), (
        f"docs/screenshots/ were made from another frontend/ (recorded {recorded}, now {frontend_hash()}):"
        f" run `{COMMAND}` and commit what it writes"
    )


def test_every_screenshot_readme_shows_is_there() -> None:
    readme = (OUT.parents[1] / "README.md").read_text()
    for name in PICTURES:
        assert f"docs/screenshots/{name}" in readme
        assert (OUT / name).is_file(), f"docs/screenshots/{name} is missing: run `{COMMAND}`"


def test_the_hash_changes_with_any_served_file_and_ignores_the_frontends_tests(tmp_path: Path) -> None:
    (tmp_path / "js").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / "index.html").write_text("<p>a</p>")
    (tmp_path / "js" / "app.js").write_text("let a = 1;")
    first = frontend_hash(tmp_path)
    (tmp_path / "tests" / "app.test.mjs").write_text("test")
    assert frontend_hash(tmp_path) == first
    assert [p.name for p in frontend_files(tmp_path)] == ["index.html", "app.js"]
    (tmp_path / "js" / "app.js").write_text("let a = 2;")
    changed = frontend_hash(tmp_path)
    assert changed != first
    (tmp_path / "js" / "app.js").rename(tmp_path / "js" / "main.js")  # a rename is a change too
    assert frontend_hash(tmp_path) != changed


def test_source_records_the_hash_it_was_given(tmp_path: Path) -> None:
    (tmp_path / "SOURCE").write_text(source_text("ab" * 32))
    assert recorded_hash(tmp_path) == "ab" * 32
    assert recorded_hash(tmp_path / "nowhere") is None
