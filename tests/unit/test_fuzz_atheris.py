"""A short, bounded session of the atheris fuzzer (tests/fuzz/fuzz_wire.py) over the frame reader and the
protocol's decoders: a few thousand coverage-guided inputs, with a fixed seed, in a subprocess (libFuzzer
owns the process it runs in). Longer sessions: `python -m tests.fuzz.fuzz_wire -max_total_time=600`."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    importlib.util.find_spec("atheris") is None, reason="atheris is not installed (Linux x86-64 wheels only)"
)
def test_a_bounded_atheris_session_finds_nothing() -> None:
    runs = 5000
    done = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.fuzz_wire", f"-runs={runs}", "-seed=1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Done {runs} runs" in done.stderr
