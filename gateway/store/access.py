"""What a gateway node reads from PostgreSQL: whose a channel is, who may follow it, and a channel's snapshot.

The node asks through `NodeAccess` (gateway.hub.ports.Access is its shape, so fast tests can hand the node
another); the statements themselves live in gateway.store.queries, except the node's own check of many
memberships at once.
"""

from __future__ import annotations

import asyncpg

from ..core.channels import Channel
from ..core.grouping import Group
from ..core.model import Counts, Job, TrajectorySummary
from ..core.protocol import Command
from . import commands, queries


async def lost_memberships(pool: asyncpg.Pool, pairs: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (user, team) pairs of `pairs` that are no longer memberships."""
    rows = await pool.fetch(
        "select u, t from unnest($1::bigint[], $2::bigint[]) as p(u, t)"
        " where not exists (select 1 from memberships m where m.user_id = p.u and m.team_id = p.t)",
        [u for u, _ in pairs],
        [t for _, t in pairs],
    )
    return [(r["u"], r["t"]) for r in rows]


class NodeAccess:
    """The node's reads, on a pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def team_of_channel(self, channel: Channel) -> int | None:
        return await queries.team_of_channel(self.pool, channel)

    async def is_member(self, user_id: int, team_id: int) -> bool:
        return await queries.is_member(self.pool, user_id, team_id)

    async def lost_memberships(self, pairs: set[tuple[int, int]]) -> list[tuple[int, int]]:
        return await lost_memberships(self.pool, pairs)

    async def trajectory_teams(self, trajectory_ids: list[int]) -> dict[int, int]:
        rows = await self.pool.fetch(
            "select id, team_id from trajectories where id = any($1::bigint[])", trajectory_ids
        )
        return {r["id"]: r["team_id"] for r in rows}

    async def team_state(self, team_id: int) -> tuple[Counts, list[TrajectorySummary]]:
        return await queries.team_state(self.pool, team_id)

    async def trajectory_groups(self, trajectory_id: int) -> list[Group]:
        return await queries.trajectory_groups(self.pool, trajectory_id)

    async def jobs_page(self, channel: Channel, after_id: int, limit: int) -> list[Job]:
        return await queries.jobs_page(self.pool, channel, after_id, limit)

    async def pending_commands(self, cluster_id: int, limit: int) -> tuple[int, list[Command]]:
        return await commands.pending(self.pool, cluster_id, limit)
