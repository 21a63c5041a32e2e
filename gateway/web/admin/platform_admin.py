"""/api/admin/...: teams and users for an automation holding a platform administrator's token, as
`gateway team|user` does from the command line, through the same gateway.store.tenants functions and as
idempotent: creating finds what has that name, removing what is gone already says so. A team's members and
clusters are managed on the team's own routes (gateway.web.admin.team_admin), where a platform administrator acts as an
owner.
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...store import tenants
from ..http.answers import answer
from ..http.guards import Refused, decode, endpoint, path_id, platform_admin, runtime_of
from .team_admin import Name


class NewName(msgspec.Struct, forbid_unknown_fields=True):
    name: Name


class Made(msgspec.Struct):
    """`created`: false when one of that name was there already (and is answered)."""

    id: int
    name: str
    created: bool


class Removed(msgspec.Struct):
    """`removed`: false when there was no such one (nothing changed)."""

    id: int
    removed: bool


class TeamRow(msgspec.Struct):
    id: int
    name: str
    members: int
    clusters: int
    jobs: int


class AdminTeams(msgspec.Struct):
    teams: list[TeamRow]


class UserRow(msgspec.Struct):
    id: int
    name: str
    teams: int


class AdminUsers(msgspec.Struct):
    users: list[UserRow]


_new_name = msgspec.json.Decoder(NewName)


async def _name(request: Request) -> str:
    name = (await decode(request, _new_name)).name
    if "\x00" in name:
        raise Refused(422, "invalid", "$.name: NUL is not allowed in text")
    return name


@endpoint
async def admin_teams(request: Request) -> Response:
    await platform_admin(request)
    async with runtime_of(request).pool.acquire() as db:
        rows = await tenants.teams(db)
    return answer(AdminTeams([TeamRow(*t) for t in rows]))


@endpoint
async def admin_create_team(request: Request) -> Response:
    await platform_admin(request)
    name = await _name(request)
    async with runtime_of(request).pool.acquire() as db:
        team_id, made = await tenants.create_team(db, name)
    return answer(Made(team_id, name, made))


@endpoint
async def admin_remove_team(request: Request) -> Response:
    team_id = path_id(request)
    await platform_admin(request)
    with_jobs = request.query_params.get("with_jobs", "") in ("1", "true")
    async with runtime_of(request).pool.acquire() as db:
        try:
            removed = await tenants.remove_team(db, team_id, with_jobs)
        except tenants.Holding as holding:
            message = f"team {team_id} still holds {holding.jobs:,} job(s): pass ?with_jobs=true to remove them"
            raise Refused(409, "holds_jobs", message) from None
    return answer(Removed(team_id, removed))


@endpoint
async def admin_users(request: Request) -> Response:
    await platform_admin(request)
    async with runtime_of(request).pool.acquire() as db:
        rows = await tenants.users(db)
    return answer(AdminUsers([UserRow(*u) for u in rows]))


@endpoint
async def admin_create_user(request: Request) -> Response:
    await platform_admin(request)
    name = await _name(request)
    async with runtime_of(request).pool.acquire() as db:
        user_id, made = await tenants.create_user(db, name)
    return answer(Made(user_id, name, made))


@endpoint
async def admin_remove_user(request: Request) -> Response:
    user_id = path_id(request)
    await platform_admin(request)
    async with runtime_of(request).pool.acquire() as db:
        removed = await tenants.remove_user(db, user_id)
    return answer(Removed(user_id, removed))
