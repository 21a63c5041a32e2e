"""The HTTP API for the browser and tools: who am I, my team's members and trajectories."""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response

from ..store import people
from .answers import Me, Member, Members, Named, Trajectories, TrajectoryRow, answer
from .guards import Refused, endpoint, member, path_id, runtime_of, session, user


@endpoint
async def me(request: Request) -> Response:
    user_id, expires = session(request)
    runtime = runtime_of(request)
    found = await people.user(runtime.pool, user_id)
    if found is None:
        raise Refused(401, "unauthorized", "unknown user")
    teams = await people.teams_of(runtime.pool, user_id)
    settings = runtime.settings
    return answer(
        Me(
            user=Named(found.id, found.name),
            teams=[Named(t.id, t.name) for t in teams],
            single_user=settings.single_user,
            local=settings.local,
            demo=settings.demo,
            expires_at=int(expires * 1000),  # the session's token: renew before then
            time=int(time.time() * 1000),  # the server's clock, to read expires_at by
        )
    )


@endpoint
async def team_members(request: Request) -> Response:
    """My Team: the members, and who is online now (across every node)."""
    team_id = path_id(request)
    await member(request, user(request), team_id)
    runtime = runtime_of(request)
    rows = await people.members(runtime.pool, team_id)
    online = set() if runtime.settings.single_user else await runtime.broker.presence.online(team_id)
    members = [Member(r.id, r.name, r.id in online) for r in rows]
    if runtime.settings.single_user:
        return answer(Members(members))
    return answer(Members(members, online=sum(1 for m in members if m.online)))


@endpoint
async def team_trajectories(request: Request) -> Response:
    """The dashboard's cards: the team's trajectories, newest first (the live counts come on the team channel)."""
    team_id = path_id(request)
    await member(request, user(request), team_id)
    rows = await people.trajectories(runtime_of(request).pool, team_id)
    return answer(Trajectories([TrajectoryRow(r.id, r.name, r.created_at.isoformat()) for r in rows]))
