"""Clusters in PostgreSQL: their ingest keys' hashes, their names."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import asyncpg

from .activity import CLI
from .types import Database


class ClusterKey(NamedTuple):
    team_id: int
    key_hash: str | None  # None until a key is issued
    silent: bool = False  # it had stopped reporting: its next request ends the silence (heard)


class SilentCluster(NamedTuple):
    id: int
    team_id: int
    name: str
    silent_since: datetime


async def key_of(pool: asyncpg.Pool, cluster_id: int) -> ClusterKey | None:
    """The cluster's team and its stored key hash, or None when there is no such cluster."""
    row = await pool.fetchrow(
        "select team_id, key_hash, silent_since is not null as silent from clusters where id = $1", cluster_id
    )
    return None if row is None else ClusterKey(row["team_id"], row["key_hash"], row["silent"])


async def heard(pool: asyncpg.Pool, cluster_id: int) -> bool:
    """The cluster was just heard from: note when, and end its silence if it was silent (its jobs are listed
    with their own statuses again, through the captured path). True when a silence ended."""
    async with pool.acquire() as db, db.transaction():
        was_silent = await db.fetchval(
            "update clusters c set heard_at = statement_timestamp(), silent_since = null"
            " from (select id, silent_since from clusters where id = $1 for update) old"
            " where c.id = old.id returning old.silent_since is not null",
            cluster_id,
        )
        if was_silent:
            await db.execute(
                "update jobs set silent_since = null where cluster_id = $1 and silent_since is not null", cluster_id
            )
    return bool(was_silent)


async def mark_silent(db: Database, silent_after: float) -> list[SilentCluster]:
    """Clusters not heard from for `silent_after` seconds become silent (since they were last heard), and every
    unfinished job of a silent cluster is listed as silent, including jobs that reached one since. The clusters
    that became silent now are returned."""
    rows = await db.fetch(
        "update clusters set silent_since = heard_at"
        " where silent_since is null and heard_at < statement_timestamp() - make_interval(secs => $1)"
        " returning id, team_id, name, silent_since",
        silent_after,
    )
    await db.execute(
        "update jobs j set silent_since = c.silent_since from clusters c"
        " where c.silent_since is not null and j.cluster_id = c.id and j.silent_since is null"
        " and j.removed_at is null and j.status in ('queued', 'retrying', 'running')"
    )
    return [SilentCluster(r["id"], r["team_id"], r["name"], r["silent_since"]) for r in rows]


async def silent_among(pool: asyncpg.Pool, cluster_ids: list[int]) -> dict[int, float]:
    """Which of these clusters are silent, and for how many seconds (by the database's clock)."""
    if not cluster_ids:
        return {}
    rows = await pool.fetch(
        "select id, extract(epoch from statement_timestamp() - silent_since)::float8 as seconds from clusters"
        " where id = any($1::bigint[]) and silent_since is not null",
        cluster_ids,
    )
    return {r["id"]: r["seconds"] for r in rows}


async def set_key_hash(db: Database, cluster_id: int, key_hash: str, by: int | None = None) -> bool:
    """Store a new key's hash (the old key stops working), recorded in the team's activity as done by user `by`
    (None: the command line) in the same statement; False when there is no such cluster."""
    done = await db.fetchval(
        "with rotated as (update clusters set key_hash = $2 where id = $1 returning team_id, name),"
        " recorded as (insert into activity (team_id, user_id, actor, action, count, clusters)"
        "  select team_id, $3, coalesce((select name from users where id = $3), $4), 'rotate_key', 1, array[name]"
        "  from rotated returning 1)"
        " select count(*) from recorded",
        cluster_id,
        key_hash,
        by,
        CLI,
    )
    return bool(done)


async def key_hashes(db: Database, cluster_ids: list[int]) -> dict[int, str | None]:
    """The stored key hash of each cluster (None: no key issued yet)."""
    rows = await db.fetch("select id, key_hash from clusters where id = any($1::bigint[])", cluster_ids)
    return {r["id"]: r["key_hash"] for r in rows}


async def name_of(pool: asyncpg.Pool, cluster_id: int) -> str:
    """The name of a cluster known to exist (one whose key was just checked)."""
    name: str = await pool.fetchval("select name from clusters where id = $1", cluster_id)
    return name


async def team_clusters(pool: asyncpg.Pool, team_id: int) -> dict[int, str]:
    """The team's clusters' names by id."""
    return {r["id"]: r["name"] for r in await pool.fetch("select id, name from clusters where team_id = $1", team_id)}


async def team_clusters_by_name(pool: asyncpg.Pool, team_id: int) -> dict[int, str]:
    """The team's clusters' names by id, in name order."""
    rows = await pool.fetch("select id, name from clusters where team_id = $1 order by name", team_id)
    return {r["id"]: r["name"] for r in rows}
