"""The HAProxy configuration docs/operations.md ("Rolling deploys") gives operators is the one `bench deploy` runs
(harness/haproxy.py's `render`), and HAProxy accepts it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.haproxy import Node, check_config, installed, render

ROOT = Path(__file__).resolve().parents[2]
# The checks go to each node's GATEWAY_HEALTH_PORT (8001), not behind a reconnect storm's queue on 8000.
NODES = [Node("node0", "10.0.0.11:8000", 8001), Node("node1", "10.0.0.12:8000", 8001)]
EXAMPLE = render(":80", NODES, 20000, "jobs.example.org")


def test_the_documented_configuration_is_the_one_the_benchmark_runs() -> None:
    assert f"```\n{EXAMPLE}```" in (ROOT / "docs" / "operations.md").read_text()


def test_haproxy_accepts_the_documented_configuration(tmp_path: Path) -> None:
    if installed() is None:
        if os.environ.get("GATEWAY_REQUIRE_HAPROXY") == "1":
            pytest.fail("GATEWAY_REQUIRE_HAPROXY=1 but HAProxy is not installed (Debian: the haproxy package)")
        pytest.skip("HAProxy is not installed")
    config = tmp_path / "gateway.cfg"
    config.write_text(EXAMPLE.replace("/run/haproxy/admin.sock", str(tmp_path / "admin.sock")))
    checked = check_config(config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Configuration file is valid" in checked.stdout + checked.stderr
