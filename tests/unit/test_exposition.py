"""What every process's /metrics carries besides its own figures: `gateway_build_info` among them."""

from __future__ import annotations

import platform
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import gateway
from gateway import exposition


def _build_info() -> dict[str, str]:
    text = exposition.exposition([]).body.decode()  # type: ignore[union-attr]
    (info,) = [
        s for family in text_string_to_metric_families(text) for s in family.samples if s.name == "gateway_build_info"
    ]
    assert info.value == 1
    return info.labels


@pytest.fixture
def fresh_commit() -> Iterator[None]:
    exposition.commit.cache_clear()
    yield
    exposition.commit.cache_clear()


def test_build_info_names_the_version_python_and_the_commit_given(
    fresh_commit: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATEWAY_COMMIT", "5659672abcdef")
    assert _build_info() == {
        "version": gateway.__version__,
        "python": platform.python_version(),
        "commit": "5659672abcdef",
    }


def test_a_commit_that_is_no_label_value_reads_unknown(fresh_commit: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_COMMIT", 'x"} 1\nevil 2')
    assert _build_info()["commit"] == "unknown"


def test_without_a_commit_given_or_git_it_reads_unknown(fresh_commit: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GATEWAY_COMMIT", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")  # no git to ask
    assert _build_info()["commit"] == "unknown"


def test_from_a_checkout_it_reads_head(fresh_commit: None, monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(exposition.__file__).resolve().parent.parent
    if not (root / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not running from a git checkout")
    monkeypatch.delenv("GATEWAY_COMMIT", raising=False)
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert head.stdout.startswith(_build_info()["commit"])
