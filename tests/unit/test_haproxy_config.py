"""The HAProxy configuration docs/operations.md ("Rolling deploys") gives operators is the one `bench deploy` runs
(harness/haproxy.py's `render`), and HAProxy accepts it."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from gateway.embedded import free_port
from harness import processes
from harness.haproxy import Node, check_config, installed, render

ROOT = Path(__file__).resolve().parents[2]
# The checks go to each node's GATEWAY_HEALTH_PORT (8001), not behind a reconnect storm's queue on 8000.
NODES = [Node("node0", "10.0.0.11:8000", 8001), Node("node1", "10.0.0.12:8000", 8001)]
EXAMPLE = render(":8080", NODES, 9500, "jobs.example.org", stats_socket="unix@haproxy-admin.sock")
# What the documented example is written for: a user without privileges whose open-files limit is this.
DOCUMENTED_FILE_LIMIT = 20_000


def test_the_documented_configuration_is_the_one_the_benchmark_runs() -> None:
    assert f"```\n{EXAMPLE}```" in (ROOT / "docs" / "operations.md").read_text()


def require_haproxy() -> None:
    if installed() is None:
        if os.environ.get("GATEWAY_REQUIRE_HAPROXY") == "1":
            pytest.fail("GATEWAY_REQUIRE_HAPROXY=1 but HAProxy is not installed (Debian: the haproxy package)")
        pytest.skip("HAProxy is not installed")


def test_haproxy_accepts_the_documented_configuration(tmp_path: Path) -> None:
    require_haproxy()
    config = tmp_path / "gateway.cfg"
    config.write_text(EXAMPLE)
    checked = check_config(config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Configuration file is valid" in checked.stdout + checked.stderr


def test_the_documented_configuration_starts_unprivileged_within_its_open_files_limit() -> None:
    """Not only `haproxy -c`: HAProxy started from the example as given (only the listening port moved to a free
    one) by the `nobody` user, with the open-files limit the docs name, runs and answers on its runtime socket."""
    require_haproxy()
    # nobody's working folder, where the runtime socket is made (pytest's own folders are its owner's alone)
    with tempfile.TemporaryDirectory(prefix="haproxy-") as folder:
        Path(folder).chmod(0o777)
        start_as_documented(Path(folder))


def start_as_documented(tmp_path: Path) -> None:
    config = tmp_path / "gateway.cfg"
    config.write_text(EXAMPLE.replace("bind :8080", f"bind 127.0.0.1:{free_port()}"))
    config.chmod(0o644)
    unprivileged = os.geteuid() == 0

    def drop_privileges() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (DOCUMENTED_FILE_LIMIT, DOCUMENTED_FILE_LIMIT))
        if unprivileged:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)

    log = tmp_path / "haproxy.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [installed() or "haproxy", "-db", "-f", str(config)],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=drop_privileges,
        )
    try:
        deadline = time.monotonic() + 30
        answered = ""
        while not answered:
            assert proc.poll() is None, f"HAProxy exited with {proc.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"HAProxy's runtime socket never answered:\n{log.read_text()}"
            answered = runtime_command(tmp_path / "haproxy-admin.sock", "show info")
            time.sleep(0.05)
        assert "Maxconn: 9500" in answered
    finally:
        processes.stop([proc])


NOBODY = 65534


def runtime_command(path: Path, line: str) -> str:
    """One command on HAProxy's runtime socket; "" while it is not there yet."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(path))
            s.sendall(line.encode() + b"\n")
            return b"".join(iter(lambda: s.recv(65536), b"")).decode()
    except OSError:
        return ""
