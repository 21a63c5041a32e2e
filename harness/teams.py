"""A fresh team as the tests and the benchmark need one: a member with a token, a cluster with its key, a trajectory."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import asyncpg

from gateway.web.people.auth import issue_token, new_cluster_key


@dataclass
class Team:
    id: int
    user_id: int
    token: str
    cluster_id: int
    cluster_key: str
    trajectory_id: int


async def make_team(pool: asyncpg.Pool, secret: str) -> Team:
    tag = secrets.token_hex(3)
    async with pool.acquire() as conn, conn.transaction():
        team_id = await conn.fetchval("insert into teams (name) values ($1) returning id", f"team {tag}")
        user_id = await conn.fetchval("insert into users (name) values ($1) returning id", f"user {tag}")
        await conn.execute("insert into memberships values ($1, $2)", team_id, user_id)
        cluster_id = await conn.fetchval(
            "insert into clusters (team_id, name) values ($1, 'gpu-1') returning id", team_id
        )
        key, key_hash = new_cluster_key(cluster_id)
        await conn.execute("update clusters set key_hash = $2 where id = $1", cluster_id, key_hash)
        trajectory_id = await conn.fetchval(
            "insert into trajectories (team_id, name) values ($1, $2) returning id", team_id, f"trajectory {tag}"
        )
    return Team(team_id, user_id, issue_token(secret, user_id, 3600), cluster_id, key, trajectory_id)
