"""Keeping the database small: jobs past retention leave the lists, published outbox rows are deleted.

Both work in bounded batches, so a backlog never turns into one long transaction that holds the outbox's
horizon (and with it every relay) back.
"""

from __future__ import annotations

import asyncpg

from .outbox import partition_filter


async def sweep_jobs(db: asyncpg.Connection, job_retention: float) -> None:
    """Jobs unchanged for `job_retention` seconds leave the lists through the captured path (counts stay
    exact); their rows stay as tombstones, so a late report cannot bring them back, until seven times as long."""
    while True:
        status = await db.execute(
            "update jobs set removed_at = now() where id in (select id from jobs where removed_at is null"
            " and updated_at < now() - make_interval(secs => $1) limit 5000)",
            job_retention,
        )
        if status != "UPDATE 5000":
            break
    await db.execute(
        "delete from jobs where id in (select id from jobs where removed_at < now() - make_interval(secs => $1) limit 5000)",
        job_retention * 7,
    )


async def prune_outbox(db: asyncpg.Connection, cursor: str, partitions: int, partition: int) -> None:
    """Delete the partition's outbox rows up to `cursor` (`<xid>:<seq>`, as the relay stores it)."""
    xid, _, seq = cursor.partition(":")
    delete = (
        "delete from job_changes where seq in (select seq from job_changes"
        f" where {partition_filter(partition, partitions)} and (xid, seq) <= ($1::bigint, $2::bigint) limit 10000)"
    )
    while True:
        status = await db.execute(delete, int(xid), int(seq))
        if status == "DELETE 0" or not status.startswith("DELETE 10000"):
            return
