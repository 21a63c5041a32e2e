"""The systems measured side by side: the gateway and its peers, each started as the processes it runs as.

Every system is told the same things (a port, the run's Redis, for the gateway and broadcaster-pg its database)
and reached by the same subscriber code in its own dialect. `server_pids` are the processes whose CPU and memory
count: for the gateway, its node and its relay together (PostgreSQL and Redis, shared by all, are not counted).
`node_pids` are the processes holding the sockets, as a peer's one process does: the CPU of those alone is each
system's "node" figure (a peer's tap runs in the harness and counts for none).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gateway.embedded import free_port

from .infra import wait_port
from .peers import notify_trigger

HERE = Path(__file__).resolve().parent
PEERS = HERE / "peers"
NODE_PEERS = PEERS / "node"


@dataclass
class Running:
    name: str
    port: int
    procs: list[subprocess.Popen]
    node_pids: list[int]  # the processes that hold the websocket connections (memory per connection)
    logs: list[Path] = field(default_factory=list)
    cleanups: list[Callable[[], None]] = field(default_factory=list)  # run once the processes have ended
    health_port: int | None = None  # the gateway's GATEWAY_HEALTH_PORT: /healthz and /metrics off the storm's queue

    @property
    def server_pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for cleanup in self.cleanups:
            cleanup()


@dataclass
class System:
    name: str
    dialect: str  # bench.subscribers dialect
    start: Callable[[Context], Running]
    path: str = "/ws"  # the websocket path subscribers open (plain adds ?channels=, socketio /socket.io/)
    deflate: bool = False  # subscribers offer permessage-deflate (as browsers do), and the server takes it
    per_change: bool = False  # a peer that sends a frame per job change, not per transaction (burst counts them)


@dataclass
class Context:
    database_url: str
    redis_url: str
    secret: str
    logdir: Path


def _spawn(
    name: str, argv: list[str], ctx: Context, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, Path]:
    log = ctx.logdir / f"{name}.log"
    out = open(log, "ab")
    proc = subprocess.Popen(
        argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, start_new_session=True
    )
    out.close()
    return proc, log


def _gateway(ctx: Context, workers: int = 1) -> Running:
    """A relay and a node (`workers` > 1: `gateway serve --workers N`, processes sharing the port, each a node)."""
    port, health_port = free_port(), free_port()
    env = {
        "GATEWAY_HEALTH_PORT": str(health_port),
        "DATABASE_URL": ctx.database_url,
        "REDIS_URL": ctx.redis_url,
        "GATEWAY_SECRET": ctx.secret,
        "GATEWAY_MAX_CONNECTIONS_PER_USER": "1000000",  # the benchmark's subscribers share a few users
        "GATEWAY_ADMISSION_SHARE": "1",  # ... so one user may take the whole admission rate
        "GATEWAY_LOG_LEVEL": os.environ.get("BENCH_GATEWAY_LOG_LEVEL", "warning"),
        "GATEWAY_DRAIN_SECONDS": "0",  # no load balancer to leave: stopped at once (`bench deploy` drains)
    }
    relay, relay_log = _spawn("gateway-relay", [sys.executable, "-m", "gateway.cli", "relay"], ctx, env)
    serve = [sys.executable, "-m", "gateway.cli", "serve", "--port", str(port)]
    node, node_log = _spawn("gateway-node", serve + (["--workers", str(workers)] if workers > 1 else []), ctx, env)
    try:
        wait_port(port, node)
    except RuntimeError:
        Running("gateway", port, [node, relay], [node.pid]).stop()
        raise
    return Running("gateway", port, [node, relay], [node.pid], [node_log, relay_log], health_port=health_port)


def _peer(name: str, argv: list[str], env: dict[str, str] | None = None) -> Callable[[Context], Running]:
    def start(ctx: Context) -> Running:
        port = free_port()
        proc, log = _spawn(name, [*argv, "--port", str(port), "--redis", ctx.redis_url], ctx, env)
        try:
            wait_port(port, proc)
        except RuntimeError:
            Running(name, port, [proc], [proc.pid]).stop()
            raise
        return Running(name, port, [proc], [proc.pid], [log])

    return start


def _broadcaster_pg(ctx: Context) -> Running:
    """broadcaster on its Postgres backend, and the row trigger that feeds it, there only while it runs."""
    notify_trigger.install(ctx.database_url)
    start = _peer(
        "broadcaster-pg", [sys.executable, str(PEERS / "broadcaster_app.py")], {"BROADCAST_URL": ctx.database_url}
    )
    try:
        running = start(ctx)
    except BaseException:
        notify_trigger.drop(ctx.database_url)
        raise
    running.cleanups.append(lambda: notify_trigger.drop(ctx.database_url))
    return running


SYSTEMS: dict[str, System] = {
    "gateway": System("gateway", "gateway", _gateway),
    # Two worker processes on one port (SO_REUSEPORT): the kernel spreads the connections; CPU and memory are
    # the workers' together (bench.procstat counts a process's descendants).
    "gateway-2w": System("gateway-2w", "gateway", functools.partial(_gateway, workers=2)),
    "floor": System("floor", "plain", _peer("floor", [sys.executable, str(PEERS / "floor.py")])),
    "node-ws": System("node-ws", "plain", _peer("node-ws", ["node", str(NODE_PEERS / "node_ws.js")])),
    # Compression negotiated: the gateway deflates each shared frame once; Node ws deflates per connection.
    "gateway-deflate": System("gateway-deflate", "gateway", _gateway, deflate=True),
    "node-ws-deflate": System(
        "node-ws-deflate",
        "plain",
        _peer("node-ws-deflate", ["node", str(NODE_PEERS / "node_ws.js"), "--deflate", "1"]),
        deflate=True,
    ),
    "socket.io": System(
        "socket.io",
        "socketio",
        _peer("socket.io", ["node", str(NODE_PEERS / "socketio.js")]),
        path="/",
        per_change=True,
    ),
    "python-socketio": System(
        "python-socketio",
        "socketio",
        _peer("python-socketio", [sys.executable, str(PEERS / "socketio_py.py")]),
        path="/",
        per_change=True,
    ),
    "broadcaster": System(
        "broadcaster", "plain", _peer("broadcaster", [sys.executable, str(PEERS / "broadcaster_app.py")])
    ),
    # Fed by PostgreSQL itself, as the gateway is: a row trigger's NOTIFY, one message per job change.
    "broadcaster-pg": System("broadcaster-pg", "plain", _broadcaster_pg, per_change=True),
}
PEER_NAMES = ["socket.io", "python-socketio", "broadcaster"]  # the peers every scenario compares with
DB_FED = ["broadcaster-pg"]  # steady and burst only: peers that read the database, not the tap
BASELINES = ["floor", "node-ws"]  # pure fan-out references (fanout only)
# The same system with permessage-deflate negotiated, as browsers and the websockets and ws clients offer it:
# both in fanout; the gateway's also in steady and burst (the peers stay uncompressed there, their cheapest).
COMPRESSED = ["gateway-deflate", "node-ws-deflate"]
WORKERS = ["gateway-2w"]  # fanout, when named: the gateway with two worker processes beside the one-process node


def ensure_node_peers() -> None:
    """The Node peers' packages, from the lock file; a missing Node.js is an error, never a silent skip."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise SystemExit("bench: Node.js and npm are needed for the Node peers (socket.io, node-ws); install them")
    if not (NODE_PEERS / "node_modules").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_PEERS, check=True)
