"""HAProxy in front of gateway nodes, as docs/operations.md ("Rolling deploys") tells operators to run it: the
configuration (`render`: the documented example is this function's output), a process of it started from
Debian's package (`/usr/sbin/haproxy`), and what its runtime API says about each node (UP, DOWN, sessions).

`python -m bench deploy` runs its subscribers through it; tests/unit/test_haproxy_config.py holds the documented
example to `render` and has `haproxy -c` check it.
"""

from __future__ import annotations

import asyncio
import csv
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from harness import processes

HAPROXY = "/usr/sbin/haproxy"  # Debian's haproxy package
# The health check: a check every INTER seconds (HAProxy's default), every FASTINTER once one has failed; a node is
# out after FALL failed checks, at most INTER + (FALL - 1) x FASTINTER = 4 s after its /readyz turns 503, well
# within GATEWAY_DRAIN_SECONDS' 6 s (INTER x FALL: HAProxy's defaults, without fastinter, at the worst); back in
# after RISE passed ones.
INTER, FASTINTER, FALL, RISE = 2.0, 1.0, 3, 2


@dataclass(frozen=True)
class Node:
    name: str
    address: str  # host:port
    check_port: int = 0  # the node's GATEWAY_HEALTH_PORT, where the checks go (0: its address's port)


def render(
    bind: str,
    nodes: list[Node],
    maxconn: int,
    host: str,
    stats_socket: str = "/run/haproxy/admin.sock",
    inter: float = INTER,
    fastinter: float = FASTINTER,
    fall: int = FALL,
    rise: int = RISE,
) -> str:
    """An HAProxy configuration (2.2 or later) for gateway nodes: websockets pass through as tunnels, /readyz
    decides which nodes get new connections, a node's established sessions stay until the node closes them.
    `host`: a name the nodes answer for (GATEWAY_HOSTS), sent in the health check's Host header."""
    servers = "\n".join(
        f"    server {n.name} {n.address} check" + (f" port {n.check_port}" if n.check_port else "") for n in nodes
    )
    return f"""\
global
    maxconn {maxconn}
    stats socket {stats_socket} mode 600 level admin

defaults
    mode http
    # The client's address for the node's logs; and a node on the same host then knows a request came through
    # the proxy (its /metrics answers loopback clients without a token only when they did not)
    option forwardfor
    timeout connect 5s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    # Once a websocket is upgraded this one alone applies: far above GATEWAY_KEEPALIVE (the node's pings)
    timeout tunnel 1h
    timeout client-fin 10s
    timeout server-fin 10s
    retries 3
    option redispatch

frontend gateway
    bind {bind}
    maxconn {maxconn}
    default_backend gateway_nodes

backend gateway_nodes
    balance leastconn
    option httpchk GET /readyz
    http-check send hdr Host {host}
    http-check expect status 200
    default-server inter {inter:g}s fastinter {fastinter:g}s fall {fall} rise {rise}
{servers}
"""


def installed() -> str | None:
    """HAProxy's path, or None where it is not installed."""
    return HAPROXY if Path(HAPROXY).exists() else shutil.which("haproxy")


def check_config(path: Path) -> subprocess.CompletedProcess[str]:
    """`haproxy -c`: whether HAProxy accepts the configuration (its answer, returncode 0 when it does)."""
    return subprocess.run(
        [installed() or HAPROXY, "-c", "-f", str(path)], capture_output=True, text=True, timeout=60, check=False
    )


class HAProxy:
    """One HAProxy process on a configuration of `render`'s, in `workdir` (its config, runtime socket, log)."""

    def __init__(self, workdir: Path, name: str, port: int, nodes: list[Node], maxconn: int, host: str) -> None:
        self.name = name
        self.port = port
        self.socket = workdir / f"{name}.sock"
        self.config = workdir / f"{name}.cfg"
        self.log = workdir / f"{name}.log"
        self.config.write_text(render(f"127.0.0.1:{port}", nodes, maxconn, host, str(self.socket)))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def start(self, timeout: float = 30.0) -> None:
        """Run it in the foreground (`-db`); returns once its runtime API answers."""
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [installed() or HAPROXY, "-db", "-f", str(self.config)], stdout=out, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"haproxy exited with {self.proc.returncode}:\n{self.log.read_text()}")
            try:
                self.command("show info")
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None:
            processes.stop([self.proc])

    def command(self, line: str) -> str:
        """One command on the runtime API (the stats socket); its whole answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.socket))
            s.sendall(line.encode() + b"\n")
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def stat(self) -> list[dict[str, str]]:
        """`show stat`: a row per frontend, backend and server (HAProxy's management guide, "CSV format")."""
        return list(csv.DictReader(self.command("show stat").lstrip("# ").splitlines()))

    def servers(self) -> dict[str, dict[str, str]]:
        """Each node's row of `show stat` (status: UP, DOWN, "UP 1/3" going down...; scur: its sessions now;
        chkdown: how many times it went down; hrsp_5xx: the 5xx answers it gave)."""
        return {r["svname"]: r for r in self.stat() if r["pxname"] == "gateway_nodes" and r["svname"] != "BACKEND"}

    def own_5xx(self) -> int:
        """The 5xx answers HAProxy gave clients itself (no node to send them to), not passed on from a node."""
        rows = self.stat()
        sent = sum(int(r["hrsp_5xx"] or 0) for r in rows if r["svname"] == "FRONTEND")
        nodes = [r for r in rows if r["pxname"] == "gateway_nodes" and r["svname"] != "BACKEND"]
        return sent - sum(int(r["hrsp_5xx"] or 0) for r in nodes)

    def status(self, node: str) -> str:
        return self.servers()[node]["status"]

    async def until_status(self, node: str, status: str, timeout: float = 60.0) -> float:
        """Until HAProxy holds `node` at `status` ("UP", "DOWN"); when it first did (time.time())."""
        deadline = time.monotonic() + timeout
        while True:
            now = await asyncio.to_thread(self.status, node)
            if now == status:
                return time.time()
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: {node} is {now}, not {status}, after {timeout:g} s")
            await asyncio.sleep(0.05)
