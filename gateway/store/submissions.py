"""Submissions in PostgreSQL: what the Submissions page's actions record, and what clusters register.

Every write goes through the captured path (the submissions table's triggers), so the page updates live.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import NamedTuple

import asyncpg

from ..core.ingest import NewSubmission
from ..core.instance_types import InstanceType
from .activity import CLI


class Selected(NamedTuple):
    """A selected row and its team: `field` is "submissions" or "tasks"."""

    field: str
    id: int
    team_id: int


class FailedSync(NamedTuple):
    id: int
    cluster_id: int | None  # the cluster staging it (None: written before submissions named their cluster)


# The selected rows of teams the caller is a member of (the others read as rows that do not exist).
_SELECTION = """
select 'submissions' as field, s.id, s.team_id from submissions s
join memberships m on m.team_id = s.team_id and m.user_id = $3 where s.id = any($1::bigint[])
union all
select 'tasks', j.id, j.team_id from jobs j
join memberships m on m.team_id = j.team_id and m.user_id = $3 where j.id = any($2::bigint[])
"""


async def selection(pool: asyncpg.Pool, submissions: list[int], tasks: list[int], user_id: int) -> list[Selected]:
    """The selected submissions and tasks of teams the user is a member of, each with its team."""
    return [Selected(*r) for r in await pool.fetch(_SELECTION, submissions, tasks, user_id)]


def _count(status: str) -> int:
    """The rows an UPDATE's status (`UPDATE n`) counts."""
    return int(status.split()[-1])


async def set_held(pool: asyncpg.Pool, ids: list[int], team_id: int, held: bool) -> None:
    await pool.execute(
        "update submissions set held = $2 where id = any($1::bigint[]) and team_id = $3",
        ids,
        held,
        team_id,
    )


async def set_reviewed(pool: asyncpg.Pool, ids: list[int], team_id: int, reviewed: bool) -> int:
    """Mark (or unmark) the team's submissions reviewed; returns how many changed (those already so are not)."""
    status = await pool.execute(
        "update submissions set reviewed = $3 where id = any($1::bigint[]) and team_id = $2 and reviewed <> $3",
        ids,
        team_id,
        reviewed,
    )
    return _count(status)


# Who changed a submission, as its row says it (sql/022_acted_by.sql): the action `a`, the user `b` (null: the
# command line, named `c`), each a placeholder or literal of the statement it is part of.
_ACTED = "acted = {a}, acted_by = {b}, acted_at = now(), acted_by_name = coalesce((select name from users where id = {b}), {c})"


async def set_priority(pool: asyncpg.Pool, ids: list[int], team_id: int, priority: int, by: int | None = None) -> int:
    """Returns how many of the team's submissions it was recorded on; each says who set it (user `by`), and when."""
    status = await pool.execute(
        "update submissions set priority = $2, "
        + _ACTED.format(a="'priority'", b="$4", c="$5")
        + " where id = any($1::bigint[]) and team_id = $3",
        ids,
        priority,
        team_id,
        by,
        CLI,
    )
    return _count(status)


async def set_instance_type(
    pool: asyncpg.Pool, ids: list[int], team_id: int, chosen: InstanceType, by: int | None = None
) -> int:
    """Returns how many of the team's submissions it was recorded on: those with tasks still to run (some not run
    yet, none yet, or their data still on its way); each says who changed it (user `by`), and when. A finished
    submission keeps the type its tasks ran on, and says nothing new."""
    status = await pool.execute(
        "update submissions s set instance_type = $2, cores = $3, memory_gb = $4, preemptible = $5, "
        + _ACTED.format(a="'instance_type'", b="$7", c="$8")
        + " where id = any($1::bigint[]) and team_id = $6 and (s.staging <> 'ready'"
        "  or not exists (select 1 from jobs j where j.submission_id = s.id and j.removed_at is null)"
        "  or exists (select 1 from jobs j where j.submission_id = s.id and j.removed_at is null"
        "   and j.status in ('queued', 'retrying', 'holding')))",
        ids,
        chosen.name,
        chosen.cores,
        chosen.memory_gb,
        chosen.preemptible,
        team_id,
        by,
        CLI,
    )
    return _count(status)


async def failed_syncs(pool: asyncpg.Pool, ids: list[int], team_id: int, tasks: list[int]) -> list[FailedSync]:
    """Those of the team's submissions whose sync failed: of the selected ones, and of the selected tasks'."""
    rows = await pool.fetch(
        "select id, cluster_id from submissions where team_id = $2 and staging = 'sync_failed' and (id = any($1::bigint[])"
        " or id in (select submission_id from jobs where id = any($3::bigint[]) and team_id = $2)) order by id",
        ids,
        team_id,
        tasks,
    )
    return [FailedSync(*r) for r in rows]


async def mark_syncing(pool: asyncpg.Pool, ids: list[int]) -> None:
    """The submissions a cluster confirmed it syncs again (unless something moved them on meanwhile)."""
    await pool.execute(
        "update submissions set staging = 'syncing' where id = any($1::bigint[]) and staging = 'sync_failed'",
        ids,
    )


async def create(pool: asyncpg.Pool, team_id: int, cluster_id: int, body: NewSubmission) -> int:
    """A submission a cluster (`cluster_id`, which stages and runs it) registers for its team; returns its id."""
    new_id: int = await pool.fetchval(
        "insert into submissions (team_id, trajectory_id, user_id, project, title, priority, instance_type, cores,"
        " memory_gb, preemptible, staging, cluster_id) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        " returning id",
        team_id,
        body.trajectory_id,
        body.user_id,
        body.project,
        body.title,
        body.priority,
        body.instance_type,
        body.cores,
        body.memory_gb,
        body.preemptible,
        body.staging,
        cluster_id,
    )
    return new_id


async def update_staging(
    pool: asyncpg.Pool,
    submission_id: int,
    team_id: int,
    cluster_id: int,
    staging: str | None,
    downloaded: bool | None,
    reachable: Callable[[str], Collection[str]],
) -> str | None:
    """The staging cluster moves the submission's data along (`staging`), or the downloading tool (with the key of
    the cluster that ran it) marks it downloaded (or not); None leaves either as it is. Only the submission's own
    cluster (`cluster_id`) acts on it; one written before submissions named their cluster, any cluster of its team
    (`sync` goes to each of those). Returns the staging the submission was at (None: this cluster has no such
    submission, whether another cluster's, another team's or none at all); nothing is written when `staging` is
    not among `reachable(that staging)`. The row is locked while it is read and written, so a move is checked
    against what it moves from."""
    async with pool.acquire() as db, db.transaction():
        current: str | None = await db.fetchval(
            "select staging from submissions where id = $1 and team_id = $2"
            " and (cluster_id = $3 or cluster_id is null) for update",
            submission_id,
            team_id,
            cluster_id,
        )
        if current is None or (staging is not None and staging not in reachable(current)):
            return current
        await db.execute(
            "update submissions set staging = coalesce($2::text, staging),"
            " downloaded_at = case when $3::boolean is null then downloaded_at"
            " when $3::boolean then coalesce(downloaded_at, now()) end"
            " where id = $1",
            submission_id,
            staging,
            downloaded,
        )
        return current
