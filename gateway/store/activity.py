"""Who did what (sql/017_activity.sql): recorded by the code that makes each change, in its transaction where it
has one, read by a team's owners and admins (GET /api/teams/<id>/activity), pruned after the retention setting."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from .types import Database

CLI = "command line"  # the actor named when no user acted: `gateway team|user|member|cluster`


@dataclass(frozen=True)
class Entry:
    id: int
    at: datetime
    user_id: int | None
    actor: str
    action: str
    count: int
    clusters: list[str]
    scope: str


async def record(
    db: Database,
    team_id: int,
    user_id: int | None,
    action: str,
    count: int = 0,
    clusters: list[str] | None = None,
    scope: str = "",
) -> int:
    """Record one action; its id. `user_id` None: the command line or an automation."""
    return await db.fetchval(
        "insert into activity (team_id, user_id, actor, action, count, clusters, scope)"
        " select $1, $2, coalesce((select name from users where id = $2), $7), $3, $4, $5, $6 returning id",
        team_id,
        user_id,
        action,
        count,
        sorted(set(clusters or [])),
        scope,
        CLI,
    )


async def page(
    db: Database,
    team_id: int,
    limit: int,
    after: tuple[datetime, int] | None = None,
    person: int | None = None,
    action: str | None = None,
    since: datetime | None = None,
) -> list[Entry]:
    """The team's activity, newest first, after the keyset position `after` (at, id)."""
    rows = await db.fetch(
        "select id, at, user_id, actor, action, count, clusters, scope from activity where team_id = $1"
        " and ($2::timestamptz is null or (at, id) < ($2, $3::bigint))"
        " and ($4::bigint is null or user_id = $4) and ($5::text is null or action = $5)"
        " and ($6::timestamptz is null or at >= $6)"
        " order by at desc, id desc limit $7",
        team_id,
        after[0] if after else None,
        after[1] if after else None,
        person,
        action,
        since,
        limit,
    )
    return [Entry(*r) for r in rows]


async def prune(db: asyncpg.Connection | asyncpg.Pool, days: float) -> None:
    """Delete what is older than `days`, in bounded batches."""
    while True:
        status = await db.execute(
            "delete from activity where id in (select id from activity"
            " where at < now() - make_interval(secs => $1) limit 5000)",
            days * 86400.0,
        )
        if status != "DELETE 5000":
            return
