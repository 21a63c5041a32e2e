"""PostgreSQL restarted under a running gateway: the relay reconnects and resumes, every subscriber converges.

Its own world on an embedded PostgreSQL (from PyPI) that the test stops and starts, so the machine's server and
the other tests are not disturbed.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from gateway.embedded import EmbeddedPostgres, EmbeddedValkey, free_port
from gateway.store.migrate import migrate
from harness.follower import Follower
from tests.conftest import Process, spawn, wait_http
from tests.integration.conftest import make_team


def ready(node: Process) -> bool:
    """/readyz says the node can serve: PostgreSQL and Redis in reach, and an active relay."""
    try:
        with urllib.request.urlopen(f"{node.http}/readyz", timeout=5) as response:
            return response.status == 200
    except OSError:  # 503 (an HTTPError) while something is missing, or the node not answering yet
        return False


class PgWorld:
    def __init__(self, root: Path) -> None:
        self.pg = EmbeddedPostgres(root / "pg")
        self.valkey = EmbeddedValkey(root / "valkey")
        self.root = root
        self.secret = secrets.token_urlsafe(32)
        self.url = ""
        self.processes: list[Process] = []

    def start(self) -> None:
        self.url = self.pg.start()
        asyncio.run(migrate(self.url))
        self.valkey.start()
        env = {
            **os.environ,
            "DATABASE_URL": self.url,
            "REDIS_URL": f"redis://127.0.0.1:{self.valkey.port}/0",
            "GATEWAY_SECRET": self.secret,
        }
        port = free_port()
        self.node = spawn("pg-node", ["serve", "--port", str(port)], env, self.root, port)
        self.relay = spawn("pg-relay", ["relay"], env, self.root)
        self.processes = [self.node, self.relay]
        wait_http(self.node)
        # The relay active before the test begins: one still starting when PostgreSQL goes down takes over on a
        # bus with no cursor after the changes, which is another scenario than a running gateway's restart.
        deadline = time.monotonic() + 90
        while not ready(self.node):
            assert time.monotonic() < deadline, f"no active relay within 90 s:\n{self.relay.output()[-2000:]}"
            time.sleep(0.1)

    def stop(self) -> None:
        for p in self.processes:
            p.stop()
        self.valkey.stop()
        self.pg.stop()


@pytest.fixture(scope="module")
def pgworld(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgWorld]:
    world = PgWorld(tmp_path_factory.mktemp("pgworld"))
    world.start()
    try:
        yield world
    finally:
        world.stop()


async def test_postgres_restarted_mid_stream(pgworld: PgWorld) -> None:
    pool = await asyncpg.create_pool(pgworld.url, min_size=1, max_size=4)
    team = await make_team(pool, pgworld.secret)
    ids = [
        r["id"]
        for r in await pool.fetch(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame)"
            " select $1, $2, $3, 'preprocess', 'Preprocess trajectory frame', f from generate_series(0, 19) f returning id",
            team.id,
            team.trajectory_id,
            team.cluster_id,
        )
    ]
    channel = f"trajectory:{team.trajectory_id}"
    f = Follower(pgworld.node.ws, team.token, resubscribe_on_gap=True)
    await f.__aenter__()
    try:
        await f.subscribe(channel)
        await f.subscribe(f"team:{team.id}")
        await f.wait_for(lambda f: len(f.listed(channel)) == 20)
        await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids[:10])
        await pool.close()

        await asyncio.to_thread(pgworld.pg.stop)  # every connection to it breaks
        await asyncio.sleep(1.0)
        await asyncio.to_thread(pgworld.pg.start)

        pool = await asyncpg.create_pool(pgworld.url, min_size=1, max_size=4)
        await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
        await f.wait_for(lambda f: all(j["status"] == "completed" for j in f.listed(channel).values()), timeout=30)
        await f.wait_for(lambda f: (f.channels[f"team:{team.id}"].counts or {}).get("completed") == 20, timeout=30)
        assert f.problems == []
        assert "relay active" in pgworld.relay.output().split("stopped serving", 1)[-1]  # it came back
    finally:
        await f.__aexit__()
        await pool.close()
