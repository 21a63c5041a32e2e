"""The Submissions page's saved views: `GET/POST /api/teams/{id}/views`, `PUT/DELETE /api/teams/{id}/views/{view}`,
and each member's own order of the views they see, `PUT /api/teams/{id}/views/order`.

A member lists their own views and the team's shared ones; a view they may not see (another team's, or another
member's private one) is the same 404 as one that does not exist.
"""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...core.saved_views import (
    MAX_VIEWS,
    DefaultIn,
    OrderIn,
    SavedView,
    SavedViews,
    ViewIn,
    may_change,
    order_problem,
    problem,
    visible,
)
from ...store import saved_views
from ...store.saved_views import Row
from ..http.answers import Created, answer
from ..http.guards import Refused, decode, endpoint, path_id, runtime_of, user

_decoder = msgspec.json.Decoder(ViewIn)
_NOT_FOUND = "no such view in this team"


async def _caller(request: Request, acting: bool = False) -> tuple[int, int, str]:
    """(team, user, role) of a member of the team the path names; 403 for anyone else."""
    team_id = path_id(request)
    user_id = user(request, acting=acting)
    role = await saved_views.role(runtime_of(request).pool, team_id, user_id)
    if role is None:
        raise Refused(403, "forbidden", "not a member of this team")
    return team_id, user_id, role


async def _body(request: Request) -> ViewIn:
    body = await decode(request, _decoder, limit=16_384)
    if (wrong := problem(body)) is not None:
        raise Refused(422, "invalid", wrong)
    return body


def _shown(row: Row, user_id: int, role: str) -> SavedView:
    return SavedView(
        id=row.id,
        name=row.name,
        shared=row.shared,
        default=row.default,
        mine=row.author_id == user_id,
        editable=may_change(row.author_id, row.shared, user_id, role),
        author=row.author,
        view=row.view,
    )


async def _changeable(request: Request) -> tuple[int, int, Row]:
    """(team, user, view) of the view the path names, when the caller may change it: 404 when they may not see
    it, 403 when they see it but it is someone else's."""
    view_id = path_id(request, "view")
    team_id, user_id, role = await _caller(request, acting=True)
    row = await saved_views.one(runtime_of(request).pool, team_id, user_id, view_id)
    if row is None or not visible(row.author_id, row.shared, user_id):
        raise Refused(404, "not_found", _NOT_FOUND)
    if not may_change(row.author_id, row.shared, user_id, role):
        raise Refused(403, "forbidden", "only its author, or an owner or admin of the team, may change a shared view")
    return team_id, user_id, row


@endpoint
async def list_views(request: Request) -> Response:
    team_id, user_id, role = await _caller(request)
    rows = await saved_views.listed(runtime_of(request).pool, team_id, user_id, MAX_VIEWS * 10)
    return answer(SavedViews([_shown(r, user_id, role) for r in rows]))


@endpoint
async def create_view(request: Request) -> Response:
    body = await _body(request)  # bad input is a 422 before anything is looked up
    team_id, user_id, _ = await _caller(request, acting=True)
    pool = runtime_of(request).pool
    if await saved_views.count_own(pool, team_id, user_id) >= MAX_VIEWS:
        raise Refused(409, "too_many", f"at most {MAX_VIEWS} views of your own in a team: delete one first")
    return answer(Created(await saved_views.create(pool, team_id, user_id, body)))


@endpoint
async def update_view(request: Request) -> Response:
    path_id(request, "view")  # the path's ids, then the body, are checked before anything is looked up
    body = await _body(request)
    team_id, user_id, row = await _changeable(request)
    await saved_views.update(runtime_of(request).pool, team_id, user_id, row.id, body)
    return Response(status_code=204)


@endpoint
async def delete_view(request: Request) -> Response:
    team_id, user_id, row = await _changeable(request)
    await saved_views.delete(runtime_of(request).pool, team_id, row.id)
    return Response(status_code=204)


_default_decoder = msgspec.json.Decoder(DefaultIn)


@endpoint
async def set_default_view(request: Request) -> Response:
    """The caller's default view in the team: one of their own or a shared one (null: the page's own columns)."""
    team_id, user_id, _ = await _caller(request, acting=True)
    body = await decode(request, _default_decoder)
    pool = runtime_of(request).pool
    if body.view_id is not None:
        row = await saved_views.one(pool, team_id, user_id, body.view_id)
        if row is None or not visible(row.author_id, row.shared, user_id):
            raise Refused(404, "not_found", _NOT_FOUND)
    await saved_views.choose_default(pool, team_id, user_id, body.view_id)
    return Response(status_code=204)


_order_decoder = msgspec.json.Decoder(OrderIn)


@endpoint
async def arrange_views(request: Request) -> Response:
    """The caller's order of the views they see in the team (a shared view too: the order is theirs alone)."""
    team_id, user_id, _ = await _caller(request, acting=True)
    body = await decode(request, _order_decoder, limit=32_768)
    if (wrong := order_problem(body)) is not None:
        raise Refused(422, "invalid", wrong)
    await saved_views.arrange(runtime_of(request).pool, team_id, user_id, body.view_ids)
    return Response(status_code=204)
