"""What every system under test stands on: a fresh PostgreSQL database and a Redis of the run's own.

PostgreSQL: BENCH_DATABASE_URL (a URL allowed to create databases), else the machine's server on
127.0.0.1:5432, else an embedded server from PyPI. Redis: BENCH_REDIS_URL, else a private valkey-server
on a free port, so that nobody else's pub/sub traffic lands in the measurements.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg

from gateway.embedded import EmbeddedPostgres, EmbeddedValkey, postgres_reachable, with_database
from gateway.store.migrate import migrate

from . import sql

LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"


@dataclass
class Infra:
    database_url: str
    redis_url: str
    admin_url: str
    _stops: list = field(default_factory=list)

    async def close(self) -> None:
        db = await asyncpg.connect(self.admin_url)
        try:
            name = urlsplit(self.database_url).path.lstrip("/")
            await db.execute(sql.drop_database(name, force=True))
        finally:
            await db.close()
        for stop in reversed(self._stops):
            stop()


async def start_infra(workdir: Path) -> Infra:
    stops = []
    admin = os.environ.get("BENCH_DATABASE_URL") or LOCAL_POSTGRES
    if not await postgres_reachable(admin):
        embedded_pg = EmbeddedPostgres(workdir / "pg")
        admin = embedded_pg.start()
        stops.append(embedded_pg.stop)
    name = f"bench_{secrets.token_hex(4)}"
    db = await asyncpg.connect(admin)
    try:
        await db.execute(sql.create_database(name))
    finally:
        await db.close()
    database_url = with_database(admin, name)
    await migrate(database_url)
    redis_url = os.environ.get("BENCH_REDIS_URL")
    if not redis_url:
        valkey = EmbeddedValkey(workdir / "valkey")
        redis_url = valkey.start()
        stops.append(valkey.stop)
    return Infra(database_url, redis_url, admin, stops)


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    """Until the port accepts connections; a process that exits first is an error with its output."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{proc.args!r} did not listen on {port} within {timeout:.0f} s")


def raise_open_files() -> int:
    """Thousands of sockets: lift the soft open-files limit to the hard one (children inherit it)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard
