"""Teams, users, memberships and clusters as a platform team provisions them (`gateway team|user|member|cluster`).

Creating is idempotent by name (a team's name; a user's name; a cluster's name within its team): a script run
twice finds what its first run made. Each write is one short transaction; a membership's insert or removal
goes through the outbox trigger like any other writer's, so nodes drop a removed member's subscriptions at once.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import asyncpg

from .activity import CLI

ROLES = ("owner", "admin", "member")
DELETE_BATCH = 5000  # jobs deleted per statement: a team's removal never becomes one long transaction


class Team(NamedTuple):
    id: int
    name: str
    members: int
    clusters: int
    jobs: int


class User(NamedTuple):
    id: int
    name: str
    teams: int


class Member(NamedTuple):
    team_id: int
    user_id: int
    name: str
    role: str


class Cluster(NamedTuple):
    id: int
    team_id: int
    name: str
    has_key: bool
    heard_at: datetime | None
    jobs: int


class Holding(Exception):
    """A team or cluster that still holds jobs: removing it would take them (pass `with_jobs`)."""

    def __init__(self, what: str, jobs: int) -> None:
        super().__init__(f"{what} still holds {jobs:,} job(s): pass --with-jobs to remove them too")
        self.jobs = jobs


async def create_team(db: asyncpg.Connection, name: str) -> tuple[int, bool]:
    """The team named `name`: its id, and whether it was made now."""
    async with db.transaction():
        await db.execute("select pg_advisory_xact_lock(hashtext('gateway.tenants.team'))")
        found = await db.fetchval("select id from teams where name = $1 order by id limit 1", name)
        if found is not None:
            return found, False
        return await db.fetchval("insert into teams (name) values ($1) returning id", name), True


async def teams(db: asyncpg.Connection) -> list[Team]:
    # The jobs counted in one pass over the table: a count per team read it once per team (jobs_team is partial,
    # live jobs only, and a removed job still holds its team), 4.4 s for a few hundred teams and 280,000 jobs.
    rows = await db.fetch(
        "select t.id, t.name,"
        " (select count(*) from memberships m where m.team_id = t.id),"
        " (select count(*) from clusters c where c.team_id = t.id),"
        " coalesce(j.n, 0)"
        " from teams t left join (select team_id, count(*) as n from jobs group by team_id) j on j.team_id = t.id"
        " order by t.id"
    )
    return [Team(*r) for r in rows]


async def remove_team(db: asyncpg.Connection, team_id: int, with_jobs: bool = False) -> bool:
    """Remove a team with its memberships, clusters and trajectories; False when there is no such team."""
    if not await db.fetchval("select exists (select 1 from teams where id = $1)", team_id):
        return False
    await _jobs_out(db, "team_id", team_id, f"team {team_id}", with_jobs)
    async with db.transaction():
        # Submissions, analyses and their instance types go with the team's trajectories and clusters (cascades).
        return await db.execute("delete from teams where id = $1", team_id) == "DELETE 1"


async def create_user(db: asyncpg.Connection, name: str) -> tuple[int, bool]:
    async with db.transaction():
        await db.execute("select pg_advisory_xact_lock(hashtext('gateway.tenants.user'))")
        found = await db.fetchval("select id from users where name = $1 order by id limit 1", name)
        if found is not None:
            return found, False
        return await db.fetchval("insert into users (name) values ($1) returning id", name), True


async def users(db: asyncpg.Connection, team_id: int | None = None) -> list[User]:
    rows = await db.fetch(
        "select u.id, u.name, (select count(*) from memberships m where m.user_id = u.id) from users u"
        " where $1::bigint is null or exists (select 1 from memberships m where m.user_id = u.id and m.team_id = $1)"
        " order by u.id",
        team_id,
    )
    return [User(*r) for r in rows]


async def remove_user(db: asyncpg.Connection, user_id: int) -> bool:
    """Remove a user: their memberships and sessions go with them, their submissions stay without a submitter."""
    return await db.execute("delete from users where id = $1", user_id) == "DELETE 1"


async def set_member(db: asyncpg.Connection, team_id: int, user_id: int, role: str, by: int | None = None) -> str:
    """Make the user a member of the team with `role`: "added", "changed" (another role before) or "unchanged".
    A change is recorded in the team's activity as done by user `by` (None: the command line), in its statement."""
    assert role in ROLES
    row = await db.fetchrow(
        "with before as (select role from memberships where team_id = $1 and user_id = $2),"
        " upsert as (insert into memberships (team_id, user_id, role) values ($1, $2, $3)"
        "  on conflict (team_id, user_id) do update set role = excluded.role"
        "  where memberships.role is distinct from excluded.role returning 1),"
        " recorded as (insert into activity (team_id, user_id, actor, action, count, scope)"
        "  select $1, $4, coalesce((select name from users where id = $4), $5),"
        "   case when exists (select 1 from before) then 'change_role' else 'add_member' end, 1,"
        "   'user:' || $2 || ' ' || $3 from upsert returning 1)"
        " select (select role from before) as before, (select count(*) from recorded) as recorded",
        team_id,
        user_id,
        role,
        by,
        CLI,
    )
    before = row["before"]
    return "added" if before is None else "unchanged" if before == role else "changed"


async def members(db: asyncpg.Connection, team_id: int) -> list[Member]:
    rows = await db.fetch(
        "select m.team_id, m.user_id, u.name, m.role from memberships m join users u on u.id = m.user_id"
        " where m.team_id = $1 order by array_position(array['owner', 'admin', 'member'], m.role), u.name",
        team_id,
    )
    return [Member(*r) for r in rows]


async def remove_member(db: asyncpg.Connection, team_id: int, user_id: int, by: int | None = None) -> bool:
    """Remove a membership, recorded in the team's activity as done by user `by` (None: the command line)."""
    removed = await db.fetchval(
        "with gone as (delete from memberships where team_id = $1 and user_id = $2 returning 1),"
        " recorded as (insert into activity (team_id, user_id, actor, action, count, scope)"
        "  select $1, $3, coalesce((select name from users where id = $3), $4), 'remove_member', 1, 'user:' || $2"
        "  from gone returning 1)"
        " select count(*) from recorded",
        team_id,
        user_id,
        by,
        CLI,
    )
    return bool(removed)


async def create_cluster(db: asyncpg.Connection, team_id: int, name: str) -> tuple[int, bool]:
    """The team's cluster named `name`: its id, and whether it was made now."""
    async with db.transaction():
        await db.execute("select pg_advisory_xact_lock(hashtext('gateway.tenants.cluster'), $1::int)", team_id % 2**31)
        found = await db.fetchval(
            "select id from clusters where team_id = $1 and name = $2 order by id limit 1", team_id, name
        )
        if found is not None:
            return found, False
        made = await db.fetchval("insert into clusters (team_id, name) values ($1, $2) returning id", team_id, name)
        return made, True


async def clusters(db: asyncpg.Connection, team_id: int | None = None) -> list[Cluster]:
    rows = await db.fetch(
        "select c.id, c.team_id, c.name, c.key_hash is not null, c.heard_at,"
        " (select count(*) from jobs j where j.cluster_id = c.id)"
        " from clusters c where $1::bigint is null or c.team_id = $1 order by c.id",
        team_id,
    )
    return [Cluster(*r) for r in rows]


async def remove_cluster(db: asyncpg.Connection, cluster_id: int, with_jobs: bool = False) -> bool:
    """Remove a cluster (its key stops working at once); False when there is no such cluster."""
    if not await db.fetchval("select exists (select 1 from clusters where id = $1)", cluster_id):
        return False
    await _jobs_out(db, "cluster_id", cluster_id, f"cluster {cluster_id}", with_jobs)
    async with db.transaction():
        # Its submissions stay the team's, with no cluster named to stage or run them.
        await db.execute("update submissions set cluster_id = null where cluster_id = $1", cluster_id)
        return await db.execute("delete from clusters where id = $1", cluster_id) == "DELETE 1"


async def team_exists(db: asyncpg.Connection, team_id: int) -> bool:
    return bool(await db.fetchval("select exists (select 1 from teams where id = $1)", team_id))


async def _jobs_out(db: asyncpg.Connection, column: str, value: int, what: str, with_jobs: bool) -> None:
    """Delete the jobs `column` = `value` names, a batch a transaction (each deletion captured, so every watcher
    sees the jobs leave), or refuse with Holding when `with_jobs` is not given and there are some."""
    held = await db.fetchval(f"select count(*) from jobs where {column} = $1", value)
    if held and not with_jobs:
        raise Holding(what, held)
    while held:
        status = await db.execute(
            f"delete from jobs where id in (select id from jobs where {column} = $1 limit {DELETE_BATCH})", value
        )
        if status == "DELETE 0":
            break


async def role_of(db: asyncpg.Connection | asyncpg.Pool, team_id: int, user_id: int) -> str | None:
    """The user's role in the team; None when they are not a member (or either does not exist)."""
    role: str | None = await db.fetchval(
        "select role from memberships where team_id = $1 and user_id = $2", team_id, user_id
    )
    return role


async def lock_roles(db: asyncpg.Connection, team_id: int) -> dict[int, str]:
    """Every member's role in the team, their rows locked until the transaction ends: two managers changing
    roles at once cannot both take away the last owner."""
    rows = await db.fetch("select user_id, role from memberships where team_id = $1 for update", team_id)
    return {r["user_id"]: r["role"] for r in rows}


async def find_user(db: asyncpg.Connection, user: int | str) -> int | None:
    """A user by id, or by name (the first made, when names repeat)."""
    if isinstance(user, int):
        found: int | None = await db.fetchval("select id from users where id = $1", user)
    else:
        found = await db.fetchval("select id from users where name = $1 order by id limit 1", user)
    return found


async def is_platform_admin(db: asyncpg.Connection | asyncpg.Pool, user_id: int) -> bool:
    return bool(await db.fetchval("select platform_admin from users where id = $1", user_id))


async def set_platform_admin(db: asyncpg.Connection, user_id: int, admin: bool) -> bool:
    """Make the user a platform administrator (or no longer one); False when there is no such user."""
    return await db.execute("update users set platform_admin = $2 where id = $1", user_id, admin) == "UPDATE 1"
