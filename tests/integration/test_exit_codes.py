"""Every command's exit status, as a script or a service manager sees it (docs/cli.md's table, gateway/exits.py):
0 done or stopped by a signal, 2 bad usage or configuration, 3 a token refused, 4 refused, 5 unreachable."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
import pytest

from gateway.credentials import issue_token
from gateway.embedded import free_port
from tests.conftest import Stack
from tests.integration.conftest import Team

UNREACHABLE_PG = "postgresql://postgres@127.0.0.1:1/none"
UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"


def gateway(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args], env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def env(stack: Stack) -> dict[str, str]:
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return {**keep, "DATABASE_URL": stack.database_url, "REDIS_URL": stack.redis_url, "GATEWAY_SECRET": stack.secret}


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("gateway: ")]
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "status", "says"),
    [
        # Every command's other bad flags are 2 the same way: tests/unit/test_cli.py, in the process.
        (["serve", "--workers", "0"], 2, "--workers"),
        (["revoke", "--user", "999999999"], 4, "no user 999999999"),
        (["token", "--user", "999999999"], 4, "no user 999999999"),
        (["cluster-key", "--cluster", "999999999"], 4, "no cluster 999999999"),
    ],
)
def test_bad_usage_is_2_and_what_does_not_exist_is_4(
    env: dict[str, str], args: list[str], status: int, says: str
) -> None:
    done = gateway(args, env)
    assert done.returncode == status, (done.returncode, done.stderr)
    assert says in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("args", "unreachable"),
    [
        (["serve", "--port", "0"], {"DATABASE_URL": UNREACHABLE_PG}),
        (["serve", "--port", "0"], {"REDIS_URL": UNREACHABLE_REDIS}),
        (["relay"], {"DATABASE_URL": UNREACHABLE_PG}),
        (["relay"], {"REDIS_URL": UNREACHABLE_REDIS}),
        (["migrate"], {"DATABASE_URL": UNREACHABLE_PG}),
        (["revoke", "--user", "1"], {"DATABASE_URL": UNREACHABLE_PG}),
        (["cluster-key", "--cluster", "1"], {"DATABASE_URL": UNREACHABLE_PG}),
        (["tail", "--team", "1", "--token", "x", "--attempts", "1", "--url", "http://127.0.0.1:1"], {}),
    ],
)
def test_a_server_that_does_not_answer_is_5_in_one_line(
    env: dict[str, str], args: list[str], unreachable: dict[str, str]
) -> None:
    done = gateway(args, {**env, **unreachable})
    assert done.returncode == 5, (done.returncode, done.stderr)
    assert "cannot" in one_line(done).lower() or "connect" in done.stderr.lower()


def test_sentinels_that_do_not_answer_are_5_in_one_line_naming_each(env: dict[str, str]) -> None:
    done = gateway(["relay"], {**env, "REDIS_URL": "redis+sentinel://127.0.0.1:1,127.0.0.1:2/mymaster"})
    assert done.returncode == 5, (done.returncode, done.stderr)
    line = one_line(done)
    assert line.startswith("gateway: cannot reach Redis: MasterNotFoundError: No master found for 'mymaster'"), line
    assert "sentinel 127.0.0.1:1 - " in line and "sentinel 127.0.0.1:2 - " in line and "<redis" not in line, line


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://127.0.0.1:26379", "REDIS_URL: name the monitored service after the sentinels"),
        ("redis+sentinel://:topsecret@127.0.0.1:x/mymaster", "REDIS_URL: a port is not a number from 1 to 65535"),
        (
            "http://127.0.0.1:6379/0",
            "REDIS_URL: expected a URL starting redis://, rediss://, unix:// or redis+sentinel",
        ),
    ],
)
def test_a_redis_url_no_client_could_use_is_2_before_anything_starts(env: dict[str, str], url: str, says: str) -> None:
    for args in (["serve", "--port", "0"], ["relay"], ["check"]):
        done = gateway(args, {**env, "REDIS_URL": url})
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert one_line(done).startswith(f"gateway: {says}") and "topsecret" not in done.stderr, done.stderr


async def test_token_check_says_whose_and_refuses_a_bad_or_revoked_one_with_3(
    env: dict[str, str], stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    good = gateway(["token", "--check", team.token], env)
    assert good.returncode == 0, good.stderr
    assert good.stdout.startswith(f"user {team.user_id}, token id ") and "not revoked" in good.stdout
    forged = gateway(["token", "--check", issue_token("x" * 40, team.user_id, 60)], env)
    assert forged.returncode == 3 and one_line(forged) == "gateway: token refused: invalid token"
    expired = gateway(["token", "--check", issue_token(stack.secret, team.user_id, -10)], env)
    assert expired.returncode == 3 and one_line(expired) == "gateway: token refused: token expired"
    assert gateway(["revoke", "--user", str(team.user_id)], env).returncode == 0
    revoked = gateway(["token", "--check", team.token], env)
    assert revoked.returncode == 3 and one_line(revoked) == "gateway: token refused: token revoked"


def test_a_port_in_use_is_2_at_once_for_serve_and_the_demo(env: dict[str, str], tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for args in (["serve", "--port", str(port)], ["demo", "--port", str(port), "--data", str(tmp_path)]):
            started = time.monotonic()
            done = gateway(args, env, timeout=60)
            assert done.returncode == 2, (args, done.stderr)
            assert f"cannot listen on 127.0.0.1:{port}" in one_line(done)
            assert time.monotonic() - started < 30  # before any server started, not after a minute


@pytest.mark.parametrize("command", [["serve"], ["relay"]])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_asked_for_by_a_signal_is_0(
    env: dict[str, str], command: list[str], sig: signal.Signals, tmp_path: Path
) -> None:
    port = free_port()
    args = command + (["--port", str(port)] if command == ["serve"] else [])
    log = tmp_path / "out.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "gateway", *args], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        ready = "serving on" if command == ["serve"] else "relay"
        while ready not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
        proc.send_signal(sig)
        assert proc.wait(60) == 0, log.read_text(errors="replace")
        assert "Traceback" not in log.read_text(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_health_port_in_use_or_out_of_range_is_2(env: dict[str, str]) -> None:
    port = free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        health = taken.getsockname()[1]
        done = gateway(["serve", "--port", str(port)], {**env, "GATEWAY_HEALTH_PORT": str(health)}, timeout=60)
        assert done.returncode == 2, done.stderr
        assert one_line(done) == (
            f"gateway: cannot listen on 127.0.0.1:{health}: Address already in use: set GATEWAY_HEALTH_PORT to another"
        )
    same = gateway(["serve", "--port", str(port)], {**env, "GATEWAY_HEALTH_PORT": str(port)}, timeout=60)
    assert same.returncode == 2 and f"GATEWAY_HEALTH_PORT={port} is --port" in one_line(same)
    wild = gateway(["serve", "--port", str(port)], {**env, "GATEWAY_HEALTH_PORT": "70000"}, timeout=60)
    assert wild.returncode == 2 and "GATEWAY_HEALTH_PORT=70000: expected a port" in one_line(wild)


# Every command reads DATABASE_URL and REDIS_URL when they are set: a malformed one stops each of them at once.
COMMANDS = [
    ["check"],
    ["serve", "--port", "0"],
    ["relay"],
    ["migrate"],
    ["demo", "--port", "0"],
    ["token", "--user", "1"],
    ["revoke", "--user", "1"],
    ["cluster-key", "--cluster", "1"],
    ["simulate", "--cluster-key", "c1.key"],
    ["tail", "--team", "1", "--token", "x"],
]
PASSWORD_PIECES = ("Tr0ub4dor", "SECRETTAIL", "54321")
# Passwords written as they are, holding / @ # ? & (each moves where a client thinks the host starts), a wrong
# scheme, a bad port, and Sentinel URLs with bad parts.
MALFORMED = [
    ("DATABASE_URL", "postgresql://postgres:Tr0ub4dor/SECRETTAIL@127.0.0.1:5432/db"),
    ("DATABASE_URL", "postgresql://postgres:Tr0ub4dor@SECRETTAIL@127.0.0.1:5432/db"),
    ("DATABASE_URL", "postgresql://postgres:Tr0ub4dor#SECRETTAIL@127.0.0.1:5432/db"),
    ("DATABASE_URL", "postgresql://postgres:Tr0ub4dor?SECRETTAIL@127.0.0.1:5432/db"),
    ("DATABASE_URL", "postgresql://postgres:54321/Tr0ub4dor@127.0.0.1:5432/db"),
    ("DATABASE_URL", "mysql://postgres:Tr0ub4dorSECRETTAIL@127.0.0.1:5432/db"),
    ("DATABASE_URL", "postgresql://postgres:Tr0ub4dorSECRETTAIL@127.0.0.1:99999/db"),
    ("DATABASE_URL", "postgresql://postgres:Tr0ub4dorSECRETTAIL@127.0.0.1:5432,h2:x/db"),
    ("REDIS_URL", "redis://default:Tr0ub4dor/SECRETTAIL@127.0.0.1:6379/0"),
    ("REDIS_URL", "redis://default:Tr0ub4dor@SECRETTAIL@127.0.0.1:6379/0"),
    ("REDIS_URL", "redis://default:Tr0ub4dor#SECRETTAIL@127.0.0.1:6379/0"),
    ("REDIS_URL", "redis://:54321/Tr0ub4dor@127.0.0.1:6379/0"),
    ("REDIS_URL", "mysql://default:Tr0ub4dorSECRETTAIL@127.0.0.1:6379/0"),
    ("REDIS_URL", "redis://default:Tr0ub4dorSECRETTAIL@127.0.0.1:99999/0"),
    ("REDIS_URL", "redis+sentinel://default:Tr0ub4dor/SECRETTAIL@127.0.0.1:26379/mymaster"),
    ("REDIS_URL", "redis+sentinel://default:Tr0ub4dor@SECRETTAIL@127.0.0.1:26379/mymaster"),
    ("REDIS_URL", "redis+sentinel://default:Tr0ub4dor?SECRETTAIL@127.0.0.1:26379/mymaster"),
    ("REDIS_URL", "redis+sentinel://:Tr0ub4dorSECRETTAIL@127.0.0.1:x/mymaster"),
    ("REDIS_URL", "redis+sentinel://127.0.0.1/mymaster?sentinel_password=Tr0ub4dor&SECRETTAIL=1"),
    ("REDIS_URL", "redis+sentinel://127.0.0.1/Tr0ub4dor/SECRETTAIL"),
]


# The commands in-process, one after another in one interpreter (what main() does before any command runs is the
# same for each): each one's exit status and everything it wrote.
IN_ONE_PROCESS = """
import contextlib, io, json, sys
from gateway.cli import main
said = []
for args in json.loads(sys.argv[1]):
    out = io.StringIO()
    with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code
    said.append([code, out.getvalue()])
print(json.dumps(said))
"""


def malformed_env(setting: str, url: str) -> dict[str, str]:
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return {
        **keep,
        "DATABASE_URL": UNREACHABLE_PG,
        "REDIS_URL": UNREACHABLE_REDIS,
        "GATEWAY_SECRET": "s" * 32,
        setting: url,
    }


def stopped_at_once(args: list[str], setting: str, code: object, said: str) -> None:
    assert code == 2, (args, code, said)
    lines = [line for line in said.splitlines() if line.startswith("gateway: ")]
    assert len(lines) == 1 and lines[0].startswith(f"gateway: {setting}: "), (args, said)
    assert not any(piece in said for piece in PASSWORD_PIECES), (args, said)


@pytest.mark.parametrize(("setting", "url"), MALFORMED, ids=[f"{s}={u}" for s, u in MALFORMED])
def test_a_malformed_url_is_2_on_every_command_naming_the_setting_and_no_piece_of_its_password(
    setting: str, url: str
) -> None:
    """Every command, with every malformed URL: run in one interpreter per URL (two hundred interpreters took ten
    minutes of the suite); the next test runs each command as its own process."""
    done = subprocess.run(
        [sys.executable, "-c", IN_ONE_PROCESS, json.dumps(COMMANDS)],
        env=malformed_env(setting, url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert not any(piece in done.stdout + done.stderr for piece in PASSWORD_PIECES), done.stderr
    for args, (code, said) in zip(COMMANDS, json.loads(done.stdout), strict=True):
        stopped_at_once(args, setting, code, said)


@pytest.mark.parametrize("args", COMMANDS, ids=[a[0] for a in COMMANDS])
def test_each_command_as_its_own_process_stops_at_once_on_a_malformed_url(args: list[str]) -> None:
    """The same as a script or a service manager sees it, one malformed URL of each setting per command."""
    for setting, url in (MALFORMED[0], MALFORMED[8]):
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway", *args],
            env=malformed_env(setting, url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            out, err = process.communicate(timeout=120)
        finally:
            process.kill()
        stopped_at_once(args, setting, process.returncode, out + err)
