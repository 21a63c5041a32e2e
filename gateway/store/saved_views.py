"""The Submissions page's saved views in PostgreSQL (gateway.core.saved_views says what they hold and who may
change one)."""

from __future__ import annotations

from typing import NamedTuple

import asyncpg
import msgspec

from ..core.saved_views import ViewIn, ViewState

_encode = msgspec.json.Encoder().encode
_decode_state = msgspec.json.Decoder(ViewState).decode


class Row(NamedTuple):
    id: int
    author_id: int
    author: str
    name: str
    shared: bool
    default: bool
    view: ViewState


_SELECT = """
    select v.id, v.author_id, u.name, v.name, v.shared, d.view_id is not null, v.view::text
    from saved_views v
    join users u on u.id = v.author_id
    left join saved_view_defaults d on d.view_id = v.id and d.user_id = $2 and d.team_id = v.team_id
    left join saved_view_places p on p.view_id = v.id and p.user_id = $2
"""


def _row(r: asyncpg.Record) -> Row:
    return Row(r[0], r[1], r[2], r[3], r[4], r[5], _decode_state(r[6]))


async def role(pool: asyncpg.Pool, team_id: int, user_id: int) -> str | None:
    """The caller's role in the team (owner, admin, member), None when not a member."""
    return await pool.fetchval("select role from memberships where team_id = $1 and user_id = $2", team_id, user_id)


async def listed(pool: asyncpg.Pool, team_id: int, user_id: int, limit: int) -> list[Row]:
    """The caller's own views and those shared with the team, in the caller's order, those it leaves out by name."""
    rows = await pool.fetch(
        _SELECT + " where v.team_id = $1 and (v.author_id = $2 or v.shared)"
        " order by p.place nulls last, lower(v.name), v.id limit $3",
        team_id,
        user_id,
        limit,
    )
    return [_row(r) for r in rows]


async def one(pool: asyncpg.Pool, team_id: int, user_id: int, view_id: int) -> Row | None:
    """The team's view `view_id`, whoever wrote it (the caller decides what it may see)."""
    found = await pool.fetchrow(_SELECT + " where v.team_id = $1 and v.id = $3", team_id, user_id, view_id)
    return None if found is None else _row(found)


async def count_own(pool: asyncpg.Pool, team_id: int, user_id: int) -> int:
    return await pool.fetchval(
        "select count(*) from saved_views where team_id = $1 and author_id = $2", team_id, user_id
    )


async def create(pool: asyncpg.Pool, team_id: int, user_id: int, view: ViewIn) -> int:
    async with pool.acquire() as conn, conn.transaction():
        view_id: int = await conn.fetchval(
            "insert into saved_views (team_id, author_id, name, shared, view) values ($1, $2, $3, $4, $5::jsonb)"
            " returning id",
            team_id,
            user_id,
            view.name,
            view.shared,
            _encode(view.view).decode(),
        )
        await _set_default(conn, team_id, user_id, view_id, view.default)
        return view_id


async def update(pool: asyncpg.Pool, team_id: int, user_id: int, view_id: int, view: ViewIn) -> None:
    """Replace a view; `default` is the caller's own choice, whoever wrote the view."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "update saved_views set name = $3, shared = $4, view = $5::jsonb, updated_at = now()"
            " where team_id = $1 and id = $2",
            team_id,
            view_id,
            view.name,
            view.shared,
            _encode(view.view).decode(),
        )
        if not view.shared:  # a view made private again is no longer anyone else's default
            await conn.execute(
                "delete from saved_view_defaults where view_id = $1 and user_id <> "
                "(select author_id from saved_views where id = $1)",
                view_id,
            )
        await _set_default(conn, team_id, user_id, view_id, view.default)


async def _set_default(conn: asyncpg.Connection, team_id: int, user_id: int, view_id: int, default: bool) -> None:
    if default:
        await conn.execute(
            "insert into saved_view_defaults (team_id, user_id, view_id) values ($1, $2, $3)"
            " on conflict (team_id, user_id) do update set view_id = excluded.view_id",
            team_id,
            user_id,
            view_id,
        )
    else:
        await conn.execute(
            "delete from saved_view_defaults where team_id = $1 and user_id = $2 and view_id = $3",
            team_id,
            user_id,
            view_id,
        )


async def choose_default(pool: asyncpg.Pool, team_id: int, user_id: int, view_id: int | None) -> None:
    if view_id is None:
        await pool.execute("delete from saved_view_defaults where team_id = $1 and user_id = $2", team_id, user_id)
    else:
        async with pool.acquire() as conn:
            await _set_default(conn, team_id, user_id, view_id, True)


async def delete(pool: asyncpg.Pool, team_id: int, view_id: int) -> None:
    await pool.execute("delete from saved_views where team_id = $1 and id = $2", team_id, view_id)


async def arrange(pool: asyncpg.Pool, team_id: int, user_id: int, view_ids: list[int]) -> None:
    """The caller's order of the views they see in the team: `view_ids` first to last; ids of views they do not
    see (another team's, another member's private one, one deleted meanwhile) are passed over. Two orders from
    one person at once (two quick drags) take turns on their user row, and the later wins whole: each delete
    would otherwise miss the places the other was inserting, and the second insert break the primary key."""
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("select 1 from users where id = $1 for no key update", user_id)
        await conn.execute(
            "delete from saved_view_places p using saved_views v"
            " where p.view_id = v.id and v.team_id = $1 and p.user_id = $2",
            team_id,
            user_id,
        )
        await conn.execute(
            "insert into saved_view_places (user_id, view_id, place)"
            " select $2, v.id, o.place from unnest($3::bigint[]) with ordinality o (id, place)"
            " join saved_views v on v.id = o.id and v.team_id = $1 and (v.author_id = $2 or v.shared)",
            team_id,
            user_id,
            view_ids,
        )
