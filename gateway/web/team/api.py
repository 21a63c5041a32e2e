"""The HTTP API for the browser and tools: who am I, my team's members and trajectories."""

from __future__ import annotations

import contextlib
import time

from starlette.requests import Request
from starlette.responses import Response

from ...core.model import most_recent_first
from ...core.submission_window import BadWindow, Page, parse_page, search_matches
from ...store import clusters, people
from ...store.reads import TooSlow
from ..http.answers import ActiveTrajectories, Me, Member, Members, Named, Trajectories, TrajectoryRow, answer
from ..http.client_gone import until_gone
from ..http.guards import Refused, endpoint, member, path_id, runtime_of, session, user
from ..http.heavy import DEEP_OFFSET


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
            finishes=await people.finishes(runtime.pool, user_id),
        )
    )


@endpoint
async def team_members(request: Request) -> Response:
    """My Team: the members, and who is online now (across every node); the team's clusters' names (job rows)."""
    team_id = path_id(request)
    user_id = user(request)
    await member(request, user_id, team_id)
    runtime = runtime_of(request)
    rows = await people.members(runtime.pool, team_id)
    held = await people.roles(runtime.pool, team_id)
    online = set() if runtime.settings.single_user else await runtime.broker.presence.online(team_id)
    members = [Member(r.id, r.name, r.id in online, held.get(r.id, "member")) for r in rows]
    named = [Named(i, n) for i, n in (await clusters.team_clusters_by_name(runtime.pool, team_id)).items()]
    role = held.get(user_id, "")
    if runtime.settings.single_user:
        return answer(Members(members, clusters=named, role=role))
    return answer(Members(members, online=sum(1 for m in members if m.online), clusters=named, role=role))


def _page(request: Request, default_limit: int = 100) -> Page:
    query = request.query_params
    try:
        return parse_page({k: query.getlist(k) for k in query}, default_limit)
    except BadWindow as bad:
        raise Refused(422, "invalid", str(bad)) from None


@endpoint
async def team_trajectories(request: Request) -> Response:
    """The dashboard's cards: a page of the team's trajectories, newest first, with the summaries of those with jobs
    (the live counts then come on the team channel)."""
    team_id = path_id(request)
    user_id = user(request)
    page = _page(request)
    await member(request, user_id, team_id)
    runtime = runtime_of(request)
    timeout = runtime.settings.statement_timeout
    read = people.trajectories(runtime.pool, team_id, page.search, page.offset, page.limit, timeout)
    try:
        with runtime.heavy.slot(user_id) if page.search or page.offset >= DEEP_OFFSET else contextlib.nullcontext():
            total, rows = await until_gone(request, read)
    except TooSlow:
        raise Refused(422, "too_broad", "search too broad: narrow it") from None
    summaries = await runtime.node.listed_summaries(team_id, [r.id for r in rows])  # this page's, not the team's
    return answer(
        Trajectories(
            total=total,
            offset=page.offset,
            limit=page.limit,
            trajectories=[
                TrajectoryRow(id=r.id, name=r.name, created_at=r.created_at.isoformat(), staging=r.staging)
                for r in rows
            ],
            summaries=summaries,
        )
    )


@endpoint
async def trajectory(request: Request) -> Response:
    """One trajectory by id, whatever its age: what a panel opened from a link, a notification or a reload is
    titled with when the page has not listed it."""
    found = await people.members_trajectory(runtime_of(request).pool, path_id(request), user(request))
    if found is None:
        raise Refused(403, "forbidden", "not a member of this team")
    return answer(TrajectoryRow(id=found.id, name=found.name, created_at=found.created_at.isoformat()))


@endpoint
async def team_active_trajectories(request: Request) -> Response:
    """The Jobs popover's trajectories past those its snapshot carries: those with jobs listed, most recent change
    first, searched by name."""
    team_id = path_id(request)
    user_id = user(request)
    page = _page(request, default_limit=300)
    await member(request, user_id, team_id)
    summaries = await runtime_of(request).node.team_summaries(team_id)
    if page.search:
        summaries = [s for s in summaries if search_matches(page.search, s.name)]
    summaries.sort(key=most_recent_first, reverse=True)
    return answer(
        ActiveTrajectories(
            total=len(summaries),
            offset=page.offset,
            limit=page.limit,
            summaries=summaries[page.offset : page.offset + page.limit],
        )
    )
