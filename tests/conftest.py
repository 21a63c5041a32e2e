"""Real services for the tests: PostgreSQL and Redis, and gateway processes started from the CLI.

PostgreSQL: TEST_DATABASE_URL, else the machine's server on 127.0.0.1:5432, else an embedded one from PyPI (under
pytest-xdist, the first worker uses the machine's server and every other worker an embedded one of its own). Each
run gets a fresh database, and so does each world that asks for one: a copy of a template the session migrated once
(CREATE DATABASE ... TEMPLATE copies its files, a tenth of a second, where migrating anew takes about one).
Redis: TEST_REDIS_URL, else a private valkey-server on a free port (its pub/sub is then ours alone, and tests may
restart it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import pytest

from gateway.embedded import EmbeddedPostgres, EmbeddedValkey, free_port, postgres_reachable, with_database
from gateway.store.migrate import migrate
from harness.world import Process, spawn, wait_http  # noqa: F401  (tests import them from here too)
from tests.tiers import longest_first, tier_of

LOCAL_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
TOOLS = Path(__file__).resolve().parent / "tools"

# The nodes the tests start (with this environment) have no load balancer to leave: SIGTERM closes their websockets
# at once rather than after the drain of gateway.web.node.leaving, which tests/integration/test_drain.py tests.
os.environ.setdefault("GATEWAY_DRAIN_SECONDS", "0")


def node_tools(needed_for: str) -> Path:
    """tests/tools with its npm packages (the AsyncAPI parser, axe-core) installed from its lock file the first
    time any test needs them, whichever runs first; without Node.js and npm the test is skipped, or fails where
    GATEWAY_REQUIRE_NODE=1 (CI)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        if os.environ.get("GATEWAY_REQUIRE_NODE") == "1":
            pytest.fail(f"Node.js and npm are required (GATEWAY_REQUIRE_NODE=1) for {needed_for}")
        pytest.skip(f"Node.js and npm are needed for {needed_for}")
    installed = TOOLS / "node_modules"
    if not ((installed / "@asyncapi" / "parser").is_dir() and (installed / "axe-core").is_dir()):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=TOOLS, check=True, timeout=600)
    return TOOLS


@pytest.fixture(scope="session")
def pg_admin() -> Iterator[str]:
    """A URL with the right to create databases: TEST_DATABASE_URL, the machine's server, or an embedded one."""
    admin = os.environ.get("TEST_DATABASE_URL") or LOCAL_POSTGRES
    shared = admin == LOCAL_POSTGRES and _another_worker()  # a server named in TEST_DATABASE_URL is used as told
    if not shared and asyncio.run(postgres_reachable(admin)):
        try:
            yield admin
        finally:
            drop_template(admin)
        return
    # Not under pytest's private folder: run as root, PostgreSQL runs as another user, and each new pytest run on
    # the machine (a developer's fast tier beside the whole suite) makes that folder private again, shutting the
    # server out of its own data and socket (tests/integration/test_demo.py does the same for the demo's).
    folder = Path(tempfile.mkdtemp(prefix="gateway-tests-pg-"))
    embedded = EmbeddedPostgres(folder)
    try:
        yield embedded.start()
    finally:
        embedded.stop()  # the template goes with the server's directory
        shutil.rmtree(folder, ignore_errors=True)


def _another_worker() -> bool:
    """Under pytest-xdist, each worker but the first runs its own embedded PostgreSQL: a transaction open in one
    database holds back the relays of every database on its server (they read below the server's oldest
    transaction), so workers sharing the machine's server would stall each other's streams for as long as their
    longest transaction (a 100,000-row insert, a bench's load)."""
    return os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0"


# The migrated template of each server this session created databases on (admin URL -> database name).
_TEMPLATES: dict[str, str] = {}


def _database_url(admin: str, name: str) -> str:
    return with_database(admin, name) if "host=" not in admin else admin.replace("/postgres?", f"/{name}?")


async def _create(admin: str, name: str, template: str | None = None) -> None:
    conn = await asyncpg.connect(admin)
    try:
        await conn.execute(f'create database "{name}"' + (f' template "{template}"' if template else ""))
    finally:
        await conn.close()


def migrated_template(admin: str) -> str:
    """The name of a database this session migrated once, for create_database() to copy. Nobody connects to it
    afterwards (CREATE DATABASE ... TEMPLATE needs it idle); pg_admin drops it at the session's end."""
    if admin not in _TEMPLATES:
        name = f"gwtemplate_{os.getpid()}_{secrets.token_hex(3)}"
        asyncio.run(_create(admin, name))
        asyncio.run(migrate(_database_url(admin, name)))
        _TEMPLATES[admin] = name
    return _TEMPLATES[admin]


def drop_template(admin: str) -> None:
    if admin in _TEMPLATES:
        drop_database(admin, _database_url(admin, _TEMPLATES.pop(admin)))


def create_database(admin: str, migrated: bool = True) -> str:
    """A fresh database, migrated unless told otherwise (a copy of the session's migrated template: the same
    schema and rows `gateway migrate` makes); its URL."""
    name = f"gwtest_{os.getpid()}_{secrets.token_hex(3)}"
    asyncio.run(_create(admin, name, migrated_template(admin) if migrated else None))
    return _database_url(admin, name)


def drop_database(admin: str, url: str) -> None:
    from urllib.parse import urlsplit

    name = urlsplit(url).path.lstrip("/")

    async def drop() -> None:
        conn = await asyncpg.connect(admin)
        await conn.execute(f'drop database if exists "{name}" with (force)')
        await conn.close()

    asyncio.run(drop())


@pytest.fixture(scope="session")
def database_url(pg_admin: str) -> Iterator[str]:
    url = create_database(pg_admin)
    try:
        yield url
    finally:
        drop_database(pg_admin, url)


@pytest.fixture(scope="session")
def valkey(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkey | None]:
    if os.environ.get("TEST_REDIS_URL"):
        yield None
        return
    server = EmbeddedValkey(tmp_path_factory.mktemp("valkey"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(valkey: EmbeddedValkey | None) -> str:
    if valkey is None:
        return os.environ["TEST_REDIS_URL"]
    return f"redis://127.0.0.1:{valkey.port}/0"


@dataclass
class Stack:
    secret: str
    database_url: str
    redis_url: str
    relay: Process
    nodes: list[Process]
    relay_metrics: str  # the relay's own /metrics (GATEWAY_RELAY_METRICS_PORT)


@pytest.fixture(scope="session")
def stack(database_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One relay (serving its own /metrics) and two gateway nodes, real processes started from the CLI."""
    logdir = tmp_path_factory.mktemp("logs")
    secret = secrets.token_urlsafe(32)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "GATEWAY_SECRET": secret,
        "GATEWAY_MAX_PENDING_BYTES": str(2 << 20),
        # Tests pace chunked writes tenths of a second apart; on a busy machine a 0.2 s sleep can pass the
        # default half second, so the finish's settle time is four times longer here.
        "GATEWAY_FINISH_SETTLE": "2",
        # A cluster a test stopped is not silent while later tests of the session use its team (the silence
        # itself is tested in a world of its own: tests/integration/test_cluster_silence.py).
        "GATEWAY_CLUSTER_SILENT_AFTER": "3600",
        # Tests that stall a client under MBs of changes catch it up from the history; the byte cap on a channel's
        # history (8 MiB by default) is tested in a world of its own (tests/integration/test_write_bounds.py).
        "GATEWAY_HISTORY_BYTES": str(64 << 20),
        # An action waits this long for a cluster that does not confirm (3 s by default): a test of a silent
        # cluster waits it out, a cluster that confirms answers in tens of milliseconds (well under it at a load
        # of 10 on two cores).
        "GATEWAY_COMMAND_TIMEOUT": "1.5",
        "GATEWAY_LOG_LEVEL": "INFO",
    }
    metrics_port = free_port()
    relay = spawn("relay", ["relay"], {**env, "GATEWAY_RELAY_METRICS_PORT": str(metrics_port)}, logdir)
    nodes = []
    for i in range(2):
        port = free_port()
        nodes.append(spawn(f"node{i}", ["serve", "--port", str(port)], env, logdir, port))
    try:
        for node in nodes:
            wait_http(node)
        # Tests begin once the relay has started: a subscriber that came before it is told to reload when it
        # starts (docs/reliability.md), which tests of other things must not race.
        wait_http(nodes[0], path="/readyz")
        yield Stack(secret, database_url, redis_url, relay, nodes, f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        for p in (*nodes, relay):
            p.stop()


@contextlib.contextmanager
def extra_node(stack: Stack, name: str, tmp_path_factory: pytest.TempPathFactory, **settings: str) -> Iterator[Process]:
    """A gateway node of a test's own beside the stack's (its PostgreSQL, Redis and secret), with `settings`
    (GATEWAY_... variables) on top; answering /healthz when given, stopped afterwards."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        **settings,
    }
    node = spawn(name, ["serve", "--port", str(port)], env, tmp_path_factory.mktemp(name), port)
    try:
        wait_http(node)
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def demo_node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """A node in demo mode beside the stack's (GATEWAY_DEMO=1: the only node with a sign-in picker), one for the
    session: the account's, the bad input's and the browser's tests of the picker all sign in through it."""
    with extra_node(stack, "node-demo", tmp_path_factory, GATEWAY_DEMO="1") as node:
        yield node


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test carries its tier's marker (tests/tiers.py): `pytest -m fast` is the inner loop. Under
    pytest-xdist the modules go longest first, by the seconds a recorded run took (tests/durations.json), so the
    longest do not start at the end and the short ones fill the workers' gaps. Each module stays on one worker
    (`--dist loadfile`), and xdist keeps this order (`--no-loadscope-reorder`: by default it sorts by test count,
    which puts a world of three long tests behind every file of many quick ones)."""
    for item in items:
        item.add_marker(getattr(pytest.mark, tier_of(item.path)))
    if os.environ.get("PYTEST_XDIST_WORKER"):
        expected = longest_first(sorted({item.path for item in items}), config.rootpath)
        items.sort(key=lambda item: -expected[item.path])  # stable: each module's order is kept


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: one worker more than the cores, since most of a world's time is spent waiting on the processes it
    started; at most six, each starting its own services."""
    return min((os.cpu_count() or 1) + 1, 6)
