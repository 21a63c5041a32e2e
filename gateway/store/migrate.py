"""Apply the numbered migrations in gateway/sql/ once each, in order, recorded in `schema_migrations`."""

from __future__ import annotations

import logging
from pathlib import Path

import asyncpg

from ..resources import SQL as SQL_DIR

log = logging.getLogger(__name__)

_LOCK_KEY = 0x6A6F6273  # serialises concurrent `gateway migrate` runs


class NoMigrations(RuntimeError):
    """The package has no migration files: an install that lost them would otherwise "apply 0" and go on."""


def migration_files(directory: Path = SQL_DIR) -> list[Path]:
    return sorted(p for p in directory.glob("[0-9][0-9][0-9]_*.sql"))


async def migrate(dsn: str, directory: Path = SQL_DIR) -> list[str]:
    """Apply what is missing; returns the names applied. Safe to run again and from several processes."""
    files = migration_files(directory)
    if not files:
        raise NoMigrations(f"no migrations in {directory}: the package is incomplete (reinstall it)")
    db = await asyncpg.connect(dsn)
    applied: list[str] = []
    try:
        await db.execute("select pg_advisory_lock($1)", _LOCK_KEY)
        await db.execute(
            "create table if not exists schema_migrations ("
            " name text primary key, applied_at timestamptz not null default now())"
        )
        done = {r["name"] for r in await db.fetch("select name from schema_migrations")}
        for path in files:
            if path.name in done:
                continue
            async with db.transaction():
                await db.execute(path.read_text())
                await db.execute("insert into schema_migrations (name) values ($1)", path.name)
            log.info("applied migration %s", path.name)
            applied.append(path.name)
    finally:
        await db.close()  # closing the session releases the advisory lock
    return applied
