"""Self-check for the peer servers: each one must fan the Redis tap out correctly.

For every peer: start it on a free port, keep a state for ``team:<random>`` as the
tap does (SET under the tap channel's name), connect 3 websocket subscribers with
that peer's client protocol to that channel, PUBLISH one message for an unrelated
channel (must not arrive) and then 5 tap messages of 2 changes each, assert every
subscriber got the state first and then all 10 changes, SIGTERM the server and
assert it exited cleanly.

    .venv/bin/python -m bench.peers.check [--redis URL] [name ...]
"""

import argparse
import asyncio
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import redis.asyncio as redis
import websockets

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE / "node"
PY = sys.executable

# name -> (argv without --port/--redis, client protocol)
PEERS = {
    "floor": ([PY, str(HERE / "floor.py")], "raw"),
    "node_ws": (["node", str(NODE_DIR / "node_ws.js")], "raw"),
    "socketio_js": (["node", str(NODE_DIR / "socketio.js")], "sio"),
    "socketio_py": ([PY, str(HERE / "socketio_py.py")], "sio"),
    "broadcaster": ([PY, str(HERE / "broadcaster_app.py")], "raw"),
}
SUBSCRIBERS, MESSAGES, CHANGES_PER_MESSAGE = 3, 5, 2
SETTLE = 0.5  # joins/subscriptions are acknowledged by nobody: give them time to land


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _now() -> str:
    """A stamp as the tap's jobs carry it (the job's `updated_at`)."""
    return datetime.now(UTC).isoformat()


async def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with {proc.returncode}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise TimeoutError(f"port {port} not accepting after {timeout}s")


class RawClient:
    """GET /ws?channels=...; every text frame is one tap payload."""

    def __init__(self, port: int, channel: str):
        self.url = f"ws://127.0.0.1:{port}/ws?channels={channel}"

    async def connect(self):
        self.ws = await websockets.connect(self.url, compression=None)

    async def changes(self):
        async for frame in self.ws:
            msg = json.loads(frame)
            if msg.get("state"):
                yield msg
                continue
            for change in msg["changes"]:
                yield dict(change, channel=msg["channel"])


class SocketIOClient:
    """Engine.IO 4 over a bare websocket: open, 40 connect, 42 join, 42 job events."""

    def __init__(self, port: int, channel: str):
        self.url = f"ws://127.0.0.1:{port}/socket.io/?EIO=4&transport=websocket"
        self.channel = channel

    async def connect(self):
        self.ws = await websockets.connect(self.url, compression=None)
        opening = await self.ws.recv()
        assert opening.startswith("0{"), opening
        await self.ws.send("40")
        connected = await self.ws.recv()
        assert connected.startswith("40{") and "sid" in connected, connected
        await self.ws.send("42" + json.dumps(["join", self.channel]))

    async def changes(self):
        async for packet in self.ws:
            if packet == "2":
                await self.ws.send("3")
            elif packet.startswith("42"):
                event, change = json.loads(packet[2:])
                assert event in ("job", "state"), packet
                yield change


async def collect(client, want: int, timeout: float) -> list[dict]:
    got = []

    async def run():
        async for change in client.changes():
            got.append(change)
            if len(got) >= want:
                return

    try:
        await asyncio.wait_for(run(), timeout)
    except TimeoutError:
        pass
    return got


async def check(name: str, redis_url: str) -> str:
    argv, protocol = PEERS[name]
    port = free_port()
    run_id = random.randrange(10**9, 10**10)
    channel, other = f"team:{run_id}", f"team:{run_id + 1}"
    client_cls = RawClient if protocol == "raw" else SocketIOClient
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([*argv, "--port", str(port), "--redis", redis_url], stdout=log, stderr=log)
        clients = []
        try:
            await wait_for_port(port, proc)
            pub = redis.from_url(redis_url)
            state = {"channel": channel, "changes": [{"id": 99, "version": 1, "status": "queued"}], "state": True}
            await pub.set("bench:" + channel, json.dumps(state))
            clients = [client_cls(port, channel) for _ in range(SUBSCRIBERS)]
            await asyncio.gather(*(c.connect() for c in clients))  # concurrently, as a crowd would
            await asyncio.sleep(SETTLE)
            want = 1 + MESSAGES * CHANGES_PER_MESSAGE  # the state, then every change
            receivers = [asyncio.create_task(collect(c, want, timeout=10)) for c in clients]
            try:
                noise = {"channel": other, "changes": [{"id": 0, "version": 0, "status": "x"}]}
                await pub.publish("bench:" + other, json.dumps(noise))
                for version in range(1, MESSAGES + 1):
                    changes = [
                        {"id": job, "version": version, "status": "running", "updated_at": _now()}
                        for job in range(1, CHANGES_PER_MESSAGE + 1)
                    ]
                    await pub.publish("bench:" + channel, json.dumps({"channel": channel, "changes": changes}))
            finally:
                await pub.delete("bench:" + channel)
                await pub.aclose()
            expected = {(job, v) for v in range(1, MESSAGES + 1) for job in range(1, CHANGES_PER_MESSAGE + 1)}
            for i, got in enumerate(await asyncio.gather(*receivers)):
                assert got and got[0] == state, f"subscriber {i} did not get the state first: {got[:1]}"
                got = got[1:]
                pairs = [(c["id"], c["version"]) for c in got]
                assert all(c["channel"] == channel for c in got), f"subscriber {i} got a foreign channel: {got}"
                assert sorted(pairs) == sorted(expected), f"subscriber {i} got {sorted(pairs)}"
        except Exception as exc:
            log.seek(0)
            tail = log.read().decode(errors="replace")[-2000:]
            return f"FAIL ({type(exc).__name__}: {exc})" + (f"\n--- server output ---\n{tail}" if tail else "")
        finally:
            for c in clients:
                if hasattr(c, "ws"):
                    await c.ws.close()
            stopped = stop(proc)
        return "OK" if stopped is None else f"FAIL ({stopped})"


def stop(proc: subprocess.Popen) -> str | None:
    if proc.poll() is not None:
        return f"server had already exited with {proc.returncode}"
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return "did not exit within 10s of SIGTERM"
    # uvicorn re-raises the signal once its graceful shutdown is done: -SIGTERM is clean too.
    return None if code in (0, -signal.SIGTERM) else f"exited with {code} after SIGTERM"


def ensure_node_modules():
    if not (NODE_DIR / "node_modules").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True, stdout=subprocess.DEVNULL)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379"))
    parser.add_argument("names", nargs="*", help=f"subset of: {' '.join(PEERS)}")
    args = parser.parse_args()
    names = args.names or list(PEERS)
    if unknown := set(names) - set(PEERS):
        parser.error(f"unknown peer(s): {', '.join(sorted(unknown))}")
    if any(PEERS[n][0][0] == "node" for n in names):
        ensure_node_modules()
    failed = 0
    for name in names:
        result = await check(name, args.redis)
        failed += result != "OK"
        print(f"{name:12} {result}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
