"""Real gateway processes started from the CLI, and a world of them that a test (or `bench faults`) can break.

Shared by the tests that kill and restart parts (test_nothing_lost.py, test_faults_under_load.py) and by
`python -m bench faults`; no pytest here, so the benchmark can import it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from gateway.embedded import EmbeddedValkey, free_port
from harness import processes
from harness.proxy import Proxy


@dataclass
class Process:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    port: int = 0

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def tracebacks(self) -> str:
        return tracebacks_in(self.output())

    def stop(self) -> None:
        processes.stop([self.proc])


def tracebacks_in(log: str) -> str:
    """Each traceback in a process's log, whole, with the line before it: what a failed "no traceback" check
    should say (pytest cuts a long log short)."""
    lines = log.splitlines()
    return "\n".join(
        "\n".join(lines[max(0, i - 1) : i + 40]) for i, line in enumerate(lines) if line.startswith("Traceback")
    )


def spawn(name: str, args: list[str], env: dict[str, str], logdir: Path, port: int = 0) -> Process:
    log = logdir / f"{name}.log"
    with open(log, "wb") as handle:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", *args], env=env, stdout=handle, stderr=subprocess.STDOUT
        )
    return Process(name, proc, log, port)


# A process starting on a busy machine (both cores shared with other work) took over 20 s: one deadline of its own
# per start, generous, that says what it saw when it gives up.
START_TIMEOUT = 120.0


def wait_http(process: Process, timeout: float = START_TIMEOUT, path: str = "/healthz") -> None:
    """Until the process answers `path` with 200 (/readyz: it can serve, an active relay included)."""
    started = time.monotonic()
    deadline = started + timeout
    last = "nothing yet"
    while time.monotonic() < deadline:
        if process.proc.poll() is not None:
            raise RuntimeError(f"{process.name} exited with {process.proc.returncode}:\n{process.output()}")
        try:
            with urllib.request.urlopen(f"{process.http}{path}", timeout=5) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except OSError as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(0.1)
    raise RuntimeError(
        f"{process.name} did not answer {path} within {timeout:g} s (last: {last}); its output:\n{process.output()}"
    )


@dataclass
class World:
    """A database, a private Valkey, gateway nodes and relays, each a real process that may be killed."""

    database_url: str
    valkey: EmbeddedValkey
    secret: str
    env: dict[str, str]
    logdir: Path
    nodes: list[Process]
    relays: list[Process] = field(default_factory=list)

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.valkey.port}/0"

    def start_node(self, name: str, port: int | None = None, **extra: str) -> Process:
        """A node (on `port`, e.g. a killed node's, or a free one; `extra` over the world's environment, e.g. its
        own REDIS_URL through a proxy); wait_http() it before use."""
        port = port or free_port()
        return spawn(name, ["serve", "--port", str(port)], {**self.env, **extra}, self.logdir, port)

    def start_relay(self, name: str, database_url: str | None = None, **extra: str) -> Process:
        env = {**self.env, "DATABASE_URL": database_url or self.database_url, **extra}
        relay = spawn(name, ["relay"], env, self.logdir)
        self.relays.append(relay)
        return relay

    async def active_relay(self, timeout: float = 15.0) -> Process:
        """The relay that holds the lock: its log's last word on it is "relay active", not "standing by"."""
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            for relay in self.relays:
                out = relay.output()
                if relay.proc.poll() is None and out.rfind("relay active") > out.rfind("standing by"):
                    return relay
            await asyncio.sleep(0.1)
        raise AssertionError("no active relay: " + " | ".join(r.output()[-500:] for r in self.relays))

    def stop_relays(self) -> None:
        for relay in self.relays:
            relay.stop()
        self.relays.clear()


def postgres_target(database_url: str) -> tuple[str, int]:
    """Where the database's server listens, as a Proxy takes it: host and port, or its Unix socket's path."""
    parts = urlsplit(database_url)
    if parts.hostname:
        return parts.hostname, parts.port or 5432
    return parts.query.split("host=")[1].split("&")[0] + f"/.s.PGSQL.{parts.port or 5432}", 0  # ?host=/dir


def via_proxy(database_url: str, port: int) -> str:
    """The database's URL through a proxy listening on `port`."""
    parts = urlsplit(database_url)
    return urlunsplit(parts._replace(netloc=f"{parts.username or 'postgres'}@127.0.0.1:{port}", query=""))


async def postgres_proxy(database_url: str) -> tuple[Proxy, str]:
    """A started proxy to the database's server (TCP or the embedded server's Unix socket), and the URL
    through it: a process given that URL can be cut off from PostgreSQL without PostgreSQL stopping."""
    proxy = Proxy(*postgres_target(database_url))
    await proxy.start()
    return proxy, via_proxy(database_url, proxy.port)
