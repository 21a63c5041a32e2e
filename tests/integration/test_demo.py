"""`gateway demo` with its embedded servers: quiet once it is up, and Ctrl-C or SIGTERM stops everything it
started (no traceback, no process left behind, exit status 0).

Ctrl-C in a terminal signals the whole foreground process group, so SIGINT goes to the demo's group here;
`kill` (SIGTERM) signals the demo alone."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import httpx
import pytest

from gateway.embedded import free_port
from harness.follower import Follower
from harness.processes import alive, descendants
from harness.world import tracebacks_in

START_WITHIN = 90.0  # the embedded PostgreSQL's first start (initdb) on a busy machine
STOP_WITHIN = 45.0  # the demo's own deadlines add up to about 25 s


class Demo:
    def __init__(self, data: Path, port: int, log: Path, proc: subprocess.Popen[bytes]) -> None:
        self.data = data
        self.port = port
        self.log = log
        self.proc = proc

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    async def banner(self) -> dict[str, str]:
        """The token, database and Redis URLs the demo printed once it was up."""
        deadline = time.monotonic() + START_WITHIN
        while time.monotonic() < deadline:
            out = self.output()
            found = {
                "token": re.search(r"/\?token=(\S+)", out),
                "database_url": re.search(r"DATABASE_URL=(\S+)", out),
                "redis_url": re.search(r"REDIS_URL=(\S+)", out),
                "cluster_key": re.search(r"cluster key \(\d+\): (\S+)", out),
            }
            if all(found.values()):
                return {name: m.group(1) for name, m in found.items() if m is not None}
            assert self.proc.poll() is None, f"the demo exited:\n{out}"
            await asyncio.sleep(0.2)
        raise AssertionError(f"no banner within {START_WITHIN} s:\n{self.output()}")

    async def ready(self) -> None:
        deadline = time.monotonic() + START_WITHIN
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}") as client:
            while time.monotonic() < deadline:
                try:
                    if (await client.get("/readyz")).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.2)
        raise AssertionError(f"/readyz did not answer 200 within {START_WITHIN} s:\n{self.output()}")

    async def team_channel(self, banner: dict[str, str]) -> str:
        """The demo team's full job feed, found in the demo's own database."""
        conn = await asyncpg.connect(banner["database_url"])
        try:
            team_id = await conn.fetchval("select id from teams where name = 'Demo Lab'")
        finally:
            await conn.close()
        return f"team-jobs:{team_id}"

    def processes(self) -> set[int]:
        """Every process the demo started: its descendants, and the embedded PostgreSQL (pg_ctl detaches it)."""
        found = descendants(self.proc.pid)
        postmaster = self.data / "pg" / "postmaster.pid"
        if postmaster.exists():
            found.add(int(postmaster.read_text().split()[0]))
        return found

    def kill_everything(self) -> None:
        """After a failed test: nothing of this demo may outlive it."""
        for pid in self.processes() | {self.proc.pid}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(10)


def listening(url: str) -> bool:
    host, port = re.match(r"redis://([^:/]+):(\d+)", url).groups()  # type: ignore[union-attr]
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
async def test_a_signal_stops_the_demo_and_everything_it_started(stop_signal: signal.Signals, tmp_path: Path) -> None:
    """On `--port 0` (any free one), which each run also checks: the banner names the port the system gave, and
    the simulated clusters talk to it (they were sent to port 0, and the demo ended at once with "the simulator
    failed"). A fixed port is the restart test's."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "GATEWAY_SECRET")}
    env["GATEWAY_LOG_LEVEL"] = "INFO"
    log = tmp_path / "demo.log"
    # Not under tmp_path: run as root, PostgreSQL runs as another user, who may not enter pytest's private folder.
    data = Path(tempfile.mkdtemp(prefix="gateway-demo-"))
    with open(log, "wb") as handle:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "demo", "--port", "0", "--data", str(data), "--speed", "3"],
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group, as in a terminal
        )
    demo = Demo(data, 0, log, proc)
    try:
        banner = await demo.banner()
        found = re.search(r"open\s+http://127\.0\.0\.1:(\d+)/\?token=", demo.output())
        assert found and int(found.group(1)) != 0, demo.output()
        demo.port = int(found.group(1))
        await demo.ready()
        channel = await demo.team_channel(banner)
        async with Follower(f"ws://127.0.0.1:{demo.port}/ws", banner["token"]) as f:
            await f.subscribe(channel)
            await f.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=30)
            # The clusters at work a while (at 3 times real speed): requests, downloads, failed syncs in flight.
            await f.wait_for(lambda f: sum(m["type"] == "batch" for m in f.messages) >= 40, timeout=60)
            assert proc.poll() is None and "the simulator failed" not in demo.output(), demo.output()
            started = demo.processes()
            assert started, "the embedded servers should be running"
            if stop_signal == signal.SIGINT:
                os.killpg(proc.pid, stop_signal)  # with a subscriber still connected
            else:
                proc.send_signal(stop_signal)
            status = await asyncio.to_thread(proc.wait, STOP_WITHIN)
        out = demo.output()
        assert status == 0, out
        assert "Traceback" not in out and "Task exception was never retrieved" not in out, out
        assert "HTTP Request:" not in out, "the simulator's requests should not be logged one by one"
        assert " ERROR " not in out, out
        assert [pid for pid in started if alive(pid)] == [], out
        assert not (demo.data / "pg" / "postmaster.pid").exists()
        assert not listening(banner["redis_url"])
    finally:
        if proc.poll() is None or any(alive(pid) for pid in demo.processes()):
            demo.kill_everything()
        shutil.rmtree(data, ignore_errors=True)


async def test_a_restarted_demo_keeps_its_secret_so_open_sessions_stay_signed_in(tmp_path: Path) -> None:
    """A restart on its data folder made up a new secret: every open browser and tool got 401. And it re-keyed
        every cluster: a tool given the first run's cluster key was cut off, and each restart wrote a rotate_key row per
    cluster into the team's activity."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "GATEWAY_SECRET")}
    data = Path(tempfile.mkdtemp(prefix="gateway-demo-"))
    tokens, cluster_keys, stops, rotations = [], [], [], []
    try:
        for run in range(2):
            port = free_port()
            log = tmp_path / f"demo-{run}.log"
            with open(log, "wb") as handle:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "gateway.cli", "demo", "--port", str(port), "--data", str(data)],
                    env=env,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            demo = Demo(data, port, log, proc)
            try:
                banner = await demo.banner()
                await demo.ready()
                tokens.append(banner["token"])
                cluster_keys.append(banner["cluster_key"])
                conn = await asyncpg.connect(banner["database_url"])
                try:  # a restart re-keys nothing: the team's activity says so
                    rotations.append(await conn.fetchval("select count(*) from activity where action = 'rotate_key'"))
                finally:
                    await conn.close()
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                    for token in tokens:  # the first run's token too, on the second run
                        me = await client.get("/api/me", headers={"Authorization": f"Bearer {token}"})
                        assert me.status_code == 200, (run, me.text)
                    for key in cluster_keys:  # and the first run's cluster key
                        metrics = {"cpu": 50.0, "memory": 40.0, "disk": 30.0, "network": 1.0}
                        sent = await client.post(
                            "/api/ingest/metrics", json=metrics, headers={"Authorization": f"Bearer {key}"}
                        )
                        assert sent.status_code == 204, (run, sent.text)
                started = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(proc.wait, STOP_WITHIN) == 0, demo.output()
                stops.append(time.monotonic() - started)
                assert "Traceback" not in demo.output(), tracebacks_in(demo.output())
            finally:
                if proc.poll() is None or any(alive(pid) for pid in demo.processes()):
                    demo.kill_everything()
        assert cluster_keys[0] == cluster_keys[1]
        assert rotations[0] == rotations[1] == 3, rotations  # each cluster keyed once, by the first run
        secret = data / "secret"
        assert secret.stat().st_mode & 0o777 == 0o600  # its owner's alone
        print(f"demo stops took {', '.join(f'{s:.1f} s' for s in stops)}")
    finally:
        shutil.rmtree(data, ignore_errors=True)
