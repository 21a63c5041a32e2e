"""`gateway check` judges a configuration before anything starts, and `gateway migrate` refuses a migration edited
after it was applied: one line per check, the exit status docs/cli.md's table gives."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator

import asyncpg
import pytest
import redis

from gateway.embedded import EmbeddedValkey
from tests.conftest import Stack, create_database, drop_database

SECRET = "s" * 40


@pytest.fixture(scope="module")
def own_valkey(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Valkey of this module's own (the suite's is shared): its memory settings are changed here."""
    server = EmbeddedValkey(tmp_path_factory.mktemp("valkey-check"))
    url = server.start()
    try:
        yield url
    finally:
        server.stop()


def gateway(args: list[str], **settings: str) -> subprocess.CompletedProcess[str]:
    keep = {
        k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_") and k not in ("DATABASE_URL", "REDIS_URL")
    }
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args], env={**keep, **settings}, capture_output=True, text=True, timeout=120
    )


def problems(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in done.stderr, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("problem")]


def test_a_sound_configuration_checks_out(stack: Stack, own_valkey: str) -> None:
    redis.Redis.from_url(own_valkey).config_set("maxmemory", "256mb")
    redis.Redis.from_url(own_valkey).config_set("maxmemory-policy", "noeviction")
    done = gateway(["check"], DATABASE_URL=stack.database_url, REDIS_URL=own_valkey, GATEWAY_SECRET=SECRET)
    assert done.returncode == 0 and problems(done) == [], done.stdout + done.stderr
    assert "ok       every migration the package ships is applied, as shipped" in done.stdout
    assert "ok       Redis has maxmemory, and noeviction" in done.stdout


def test_each_problem_is_one_line_and_the_status_is_2(stack: Stack, own_valkey: str, pg_admin: str) -> None:
    r = redis.Redis.from_url(own_valkey)
    r.config_set("maxmemory", "0")
    fresh = create_database(pg_admin, migrated=False)
    try:
        done = gateway(
            ["check", "--host", "0.0.0.0", "--lb-idle-timeout", "20"],
            DATABASE_URL=fresh,
            REDIS_URL=own_valkey,
            GATEWAY_SECRET="short",
            GATEWAY_ORIGINS="*",
        )
    finally:
        drop_database(pg_admin, fresh)
    assert done.returncode == 2, done.stdout + done.stderr
    found = problems(done)
    for expected in (
        "GATEWAY_SECRET has 5 characters",
        "GATEWAY_ORIGINS=*",
        "GATEWAY_HOSTS is not set, yet the node listens on 0.0.0.0",
        "GATEWAY_KEEPALIVE (25 s) is not below the load balancer's idle timeout (20 s)",
        "migrations not applied: 001_spine.sql",
        "Redis runs without maxmemory",
    ):
        assert sum(expected in line for line in found) == 1, (expected, found)
    assert len(found) == 6
    r.config_set("maxmemory", "256mb")
    r.config_set("maxmemory-policy", "allkeys-lru")
    evicting = gateway(["check"], DATABASE_URL=stack.database_url, REDIS_URL=own_valkey, GATEWAY_SECRET=SECRET)
    assert evicting.returncode == 2 and ["evicts keys" in line for line in problems(evicting)] == [True]


def test_a_server_that_does_not_answer_is_status_5(stack: Stack) -> None:
    done = gateway(["check"], DATABASE_URL=stack.database_url, REDIS_URL="redis://127.0.0.1:1/0", GATEWAY_SECRET=SECRET)
    assert (
        done.returncode == 5
        and problems(done)
        == [line for line in problems(done) if line.startswith("problem  Redis: cannot reach it")]
        != []
    ), done.stdout


def sql(url: str, statement: str) -> object:
    async def run() -> object:
        db = await asyncpg.connect(url)
        try:
            return await db.fetchval(statement)
        finally:
            await db.close()

    return asyncio.run(run())


def test_an_applied_migration_edited_since_is_noticed_by_check_and_refused_by_migrate(
    pg_admin: str, own_valkey: str
) -> None:
    url = create_database(pg_admin)
    try:
        sql(url, "update schema_migrations set checksum = 'edited' where name = '003_submissions.sql'")
        check = gateway(["check"], DATABASE_URL=url, REDIS_URL=own_valkey, GATEWAY_SECRET=SECRET)
        assert check.returncode == 2
        assert [line for line in problems(check) if "migration" in line] == [
            "problem  migrations edited after they were applied: 003_submissions.sql"
        ]
        migrated = gateway(["migrate"], DATABASE_URL=url)
        assert migrated.returncode == 4, migrated.stderr
        assert migrated.stderr.startswith("gateway: migration 003_submissions.sql was edited after it was applied")
    finally:
        drop_database(pg_admin, url)


def test_migrations_applied_before_checksums_take_the_shipped_files_checksums(pg_admin: str) -> None:
    url = create_database(pg_admin)
    try:
        sql(url, "update schema_migrations set checksum = null")
        assert gateway(["migrate"], DATABASE_URL=url).returncode == 0
        assert sql(url, "select count(*) from schema_migrations where checksum is null") == 0
    finally:
        drop_database(pg_admin, url)
