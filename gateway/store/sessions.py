"""Where people are signed in, in PostgreSQL: the account page's list of sessions (device, last seen), written
at sign-in and renewal and then now and then while a session is used."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from ..core.sessions import Seen
from .types import Database

# A session is active while its token has not expired, its start is younger than the maximum age, and no
# revocation names it: its token id, or its user since (or before) it started.
_ACTIVE = (
    "s.expires_at > now() and s.started_at > now() - make_interval(secs => $2)"
    " and not exists (select 1 from token_revocations r where r.token_id = s.token_id)"
    " and not exists (select 1 from token_revocations r where r.user_id = s.user_id"
    "  and r.revoked_at >= s.started_at)"
)


class Session(NamedTuple):
    id: int
    token_id: str
    device: str
    started_at: datetime
    last_seen_at: datetime


async def record(db: Database, seen: list[Seen]) -> None:
    """Create or bring up to date these sessions, seen now (those of users that no longer exist are skipped)."""
    if not seen:
        return
    await db.execute(
        "insert into sessions (token_id, user_id, device, started_at, expires_at)"
        " select s.token_id, s.user_id, s.device, to_timestamp(s.started), to_timestamp(s.expires)"
        " from unnest($1::text[], $2::bigint[], $3::text[], $4::float8[], $5::float8[])"
        "  as s (token_id, user_id, device, started, expires)"
        " where exists (select 1 from users u where u.id = s.user_id)"
        " on conflict (token_id) do update set last_seen_at = now(),"
        "  device = case when excluded.device <> '' then excluded.device else sessions.device end,"
        "  expires_at = greatest(sessions.expires_at, excluded.expires_at)",
        [s.token_id for s in seen],
        [s.user_id for s in seen],
        [s.device for s in seen],
        [s.started for s in seen],
        [s.expires for s in seen],
    )


async def touch(db: Database, token_ids: list[str]) -> None:
    """These sessions (of live sockets) were seen now."""
    if token_ids:
        await db.execute("update sessions set last_seen_at = now() where token_id = any($1::text[])", token_ids)


async def prune(db: Database) -> None:
    """Forget sessions whose token expired an hour ago or more (a late renewal's row is written again)."""
    await db.execute("delete from sessions where expires_at < now() - interval '1 hour'")


async def active(db: Database, user_id: int, max_age: float, limit: int) -> tuple[int, list[Session]]:
    """How many sessions the user has active, and up to `limit` of them, most recently seen first."""
    rows = await db.fetch(
        "select s.id, s.token_id, s.device, s.started_at, s.last_seen_at, count(*) over () as total"
        f" from sessions s where s.user_id = $1 and {_ACTIVE}"
        " order by s.last_seen_at desc, s.id desc limit $3",
        user_id,
        float(max_age),
        limit,
    )
    total = rows[0]["total"] if rows else 0
    return total, [Session(r["id"], r["token_id"], r["device"], r["started_at"], r["last_seen_at"]) for r in rows]


async def active_token(db: Database, user_id: int, session_id: int, max_age: float) -> str | None:
    """The token id of the user's active session `session_id`; None when it is not one (another person's too)."""
    value: str | None = await db.fetchval(
        f"select s.token_id from sessions s where s.id = $3 and s.user_id = $1 and {_ACTIVE}",
        user_id,
        float(max_age),
        session_id,
    )
    return value


async def forget(db: Database, token_id: str) -> None:
    """A revoked session leaves the list at once (its revocation would leave it out anyway)."""
    await db.execute("delete from sessions where token_id = $1", token_id)
