"""Commands to clusters in PostgreSQL, kept until confirmed or expired (sql/015_cluster_commands.sql).

Each cluster counts its own commands (`seq`): its feed's position. A command is recorded before it is sent, so
a cluster that was away finds it in its feed's snapshot; a confirmation is recorded once, and a repeated one
changes nothing.
"""

from __future__ import annotations

from typing import NamedTuple

import asyncpg

from ..core.channels import cluster as cluster_channel
from ..core.protocol import COMMAND_EPOCH, Command, make_cursor


class Pending(NamedTuple):
    """A cluster's feed at one position: its last command's seq, and the commands not confirmed nor expired."""

    seq: int
    commands: list[Command]


class Outcome(NamedTuple):
    """What a confirmation found: `missing` (no such command of this cluster), or `not_asked` (jobs the command
    did not name), or recorded (`repeated` when it was confirmed before: nothing changed)."""

    missing: bool = False
    not_asked: list[int] = []
    repeated: bool = False
    reply_to: str = ""


def command_of(cluster_id: int, row: asyncpg.Record) -> Command:
    return Command(
        channel=cluster_channel(cluster_id),
        seq=row["seq"],
        cursor=make_cursor(COMMAND_EPOCH, row["seq"]),
        id=row["id"],
        action=row["action"],
        jobs=list(row["jobs"]),
        priority=row["priority"],
        instance_type=row["instance_type"],
    )


async def record(
    pool: asyncpg.Pool,
    command_id: str,
    cluster_id: int,
    action: str,
    jobs: list[int],
    reply_to: str,
    keep: float,
    priority: int | None = None,
    instance_type: str | None = None,
) -> Command:
    """Keep a command for `keep` seconds (or until confirmed), numbered after the cluster's last one."""
    async with pool.acquire() as db, db.transaction():
        # The cluster's row lock numbers its commands one at a time: no two share a seq, none is skipped.
        await db.execute("select 1 from clusters where id = $1 for no key update", cluster_id)
        # What expired long ago goes; the last command stays, so the count goes on from it.
        await db.execute(
            "delete from cluster_commands where cluster_id = $1 and expires_at < now() - interval '1 hour'"
            " and seq < (select max(seq) from cluster_commands where cluster_id = $1)",
            cluster_id,
        )
        row = await db.fetchrow(
            "insert into cluster_commands"
            " (id, cluster_id, seq, action, jobs, priority, instance_type, reply_to, expires_at)"
            " select $1, $2, coalesce(max(seq), 0) + 1, $3, $4, $5, $6, $7, now() + make_interval(secs => $8)"
            " from cluster_commands where cluster_id = $2"
            " returning id, seq, action, jobs, priority, instance_type",
            command_id,
            cluster_id,
            action,
            jobs,
            priority,
            instance_type,
            reply_to,
            keep,
        )
    return command_of(cluster_id, row)


async def pending(pool: asyncpg.Pool, cluster_id: int, limit: int) -> Pending:
    """The cluster's position and its commands not yet confirmed nor expired (the oldest `limit`), read in one
    statement: every command at or below the position was committed before the read."""
    rows = await pool.fetch(
        "with position as (select coalesce(max(seq), 0) as seq from cluster_commands where cluster_id = $1)"
        " select p.seq as position, c.id, c.seq, c.action, c.jobs, c.priority, c.instance_type"
        " from position p left join lateral ("
        "   select * from cluster_commands where cluster_id = $1 and confirmed_at is null and expires_at > now()"
        "   order by seq limit $2) c on true",
        cluster_id,
        limit,
    )
    return Pending(rows[0]["position"], [command_of(cluster_id, r) for r in rows if r["id"] is not None])


async def confirm(pool: asyncpg.Pool, cluster_id: int, command_id: str, jobs: list[int]) -> Outcome:
    """Record the cluster's confirmation of its command, once: only jobs the command named."""
    async with pool.acquire() as db, db.transaction():
        row = await db.fetchrow(
            "select jobs, confirmed_at is not null as confirmed, reply_to from cluster_commands"
            " where cluster_id = $1 and id = $2 for update",
            cluster_id,
            command_id,
        )
        if row is None:
            return Outcome(missing=True)
        asked = set(row["jobs"])
        not_asked = [j for j in jobs if j not in asked]
        if not_asked:
            return Outcome(not_asked=not_asked)
        if row["confirmed"]:
            return Outcome(repeated=True)
        await db.execute(
            "update cluster_commands set confirmed_at = now(), confirmed_jobs = $3 where cluster_id = $1 and id = $2",
            cluster_id,
            command_id,
            sorted(set(jobs)),
        )
    return Outcome(reply_to=row["reply_to"])


async def confirmations(pool: asyncpg.Pool, command_id: str, cluster_ids: list[int]) -> dict[int, list[int]]:
    """The recorded confirmations of a command by these clusters: the jobs each confirmed."""
    rows = await pool.fetch(
        "select cluster_id, confirmed_jobs from cluster_commands"
        " where id = $1 and cluster_id = any($2::bigint[]) and confirmed_at is not null",
        command_id,
        cluster_ids,
    )
    return {r["cluster_id"]: list(r["confirmed_jobs"]) for r in rows}
