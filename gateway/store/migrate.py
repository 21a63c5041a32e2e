"""Apply the numbered migrations in gateway/sql/ once each, in order, recorded in `schema_migrations`."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from ..resources import SQL as SQL_DIR

log = logging.getLogger(__name__)

_LOCK_KEY = 0x6A6F6273  # serialises concurrent `gateway migrate` runs


class NoMigrations(RuntimeError):
    """The package has no migration files: an install that lost them would otherwise "apply 0" and go on."""


class MigrationEdited(RuntimeError):
    """A migration applied already was changed since: the database holds what the old text made, not the new."""


@dataclass
class MigrationState:
    pending: list[str]  # shipped, not applied yet
    edited: list[str]  # applied, but the file shipped now differs from the one applied


def checksum(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


_TABLE = (
    "create table if not exists schema_migrations ("
    " name text primary key, applied_at timestamptz not null default now())",
    # Each migration's checksum as applied: a file edited afterwards is noticed. Rows from before the column
    # take the checksum of the file as first seen with it.
    "alter table schema_migrations add column if not exists checksum text",
)


async def _applied(db: asyncpg.Connection) -> dict[str, str | None]:
    return {r["name"]: r["checksum"] for r in await db.fetch("select name, checksum from schema_migrations")}


def _edited(files: list[Path], applied: dict[str, str | None]) -> list[str]:
    return [p.name for p in files if applied.get(p.name) not in (None, checksum(p))]


async def state(dsn: str, directory: Path = SQL_DIR) -> MigrationState:
    """What `migrate` would apply, and which applied migrations were edited since (nothing is written)."""
    files = migration_files(directory)
    db = await asyncpg.connect(dsn)
    try:
        exists = await db.fetchval("select to_regclass('schema_migrations') is not null")
        if not exists:
            return MigrationState([p.name for p in files], [])
        has_checksums = await db.fetchval(
            "select exists (select 1 from information_schema.columns"
            " where table_name = 'schema_migrations' and column_name = 'checksum')"
        )
        query = (
            "select name, checksum from schema_migrations"
            if has_checksums
            else "select name, null as checksum from schema_migrations"
        )
        applied = {r["name"]: r["checksum"] for r in await db.fetch(query)}
    finally:
        await db.close()
    return MigrationState([p.name for p in files if p.name not in applied], _edited(files, applied))


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
        for statement in _TABLE:
            await db.execute(statement)
        done = await _applied(db)
        edited = _edited(files, done)
        if edited:
            raise MigrationEdited(
                f"migration {', '.join(edited)} was edited after it was applied: the database holds what the"
                " applied text made; restore the file as shipped (a change goes in a new migration)"
            )
        for path in files:
            if path.name in done:
                if done[path.name] is None:  # applied before checksums were kept: the file as first seen
                    await db.execute(
                        "update schema_migrations set checksum = $2 where name = $1", path.name, checksum(path)
                    )
                continue
            async with db.transaction():
                await db.execute(path.read_text())
                await db.execute(
                    "insert into schema_migrations (name, checksum) values ($1, $2)", path.name, checksum(path)
                )
            log.info("applied migration %s", path.name)
            applied.append(path.name)
    finally:
        await db.close()  # closing the session releases the advisory lock
    return applied
