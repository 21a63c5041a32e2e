"""Clusters in PostgreSQL: their ingest keys' hashes, their names."""

from __future__ import annotations

from typing import NamedTuple

import asyncpg

from .types import Database


class ClusterKey(NamedTuple):
    team_id: int
    key_hash: str | None  # None until a key is issued


async def key_of(pool: asyncpg.Pool, cluster_id: int) -> ClusterKey | None:
    """The cluster's team and its stored key hash, or None when there is no such cluster."""
    row = await pool.fetchrow("select team_id, key_hash from clusters where id = $1", cluster_id)
    return None if row is None else ClusterKey(row["team_id"], row["key_hash"])


async def set_key_hash(db: Database, cluster_id: int, key_hash: str) -> bool:
    """Store a new key's hash (the old key stops working); False when there is no such cluster."""
    status = await db.execute("update clusters set key_hash = $2 where id = $1", cluster_id, key_hash)
    return status != "UPDATE 0"


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
