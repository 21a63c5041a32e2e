"""The Submissions page's saved views over HTTP: a person's view follows them (it is on the server), a private
view is theirs alone, a shared one the team sees, and only its author or an owner or admin changes it."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.web.people.auth import issue_token
from tests.conftest import Stack
from tests.integration.conftest import Team, make_team

VIEW: dict[str, Any] = {
    "filters": {"status": "running", "project": "", "q": "water"},
    "sort": "priority",
    "dir": "asc",
    "columns": [{"key": "title", "width": 320}, {"key": "id"}, {"key": "status"}],
}


async def send(stack: Stack, method: str, path: str, token: str, body: Any = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, timeout=10) as client:
        return await client.request(method, path, json=body, headers={"Authorization": f"Bearer {token}"})


async def colleague(pool: asyncpg.Pool, stack: Stack, team: Team, role: str = "member") -> str:
    """Another member of the team, with a role; their token."""
    user_id = await pool.fetchval("insert into users (name) values ('Colleague') returning id")
    await pool.execute("insert into memberships (team_id, user_id, role) values ($1, $2, $3)", team.id, user_id, role)
    return issue_token(stack.secret, user_id, 3600)


async def save(stack: Stack, team: Team, token: str, **fields: Any) -> int:
    body = {"name": "Running water", "view": VIEW, **fields}
    answer = await send(stack, "POST", f"/api/teams/{team.id}/views", token, body)
    assert answer.status_code == 200, answer.text
    return int(answer.json()["id"])


async def names(stack: Stack, team: Team, token: str) -> dict[str, dict[str, Any]]:
    answer = await send(stack, "GET", f"/api/teams/{team.id}/views", token)
    assert answer.status_code == 200, answer.text
    return {v["name"]: v for v in answer.json()["views"]}


async def test_a_saved_view_comes_back_as_saved_with_a_new_token(stack: Stack, team: Team) -> None:
    await save(stack, team, team.token, default=True)
    another_browser = issue_token(stack.secret, team.user_id, 3600)
    view = (await names(stack, team, another_browser))["Running water"]
    assert view["view"]["filters"] == {**VIEW["filters"], "user": None}
    assert view["view"]["columns"] == [
        {"key": "title", "width": 320},
        {"key": "id", "width": None},
        {"key": "status", "width": None},
    ]
    assert (view["view"]["sort"], view["view"]["dir"]) == ("priority", "asc")
    assert (view["default"], view["mine"], view["editable"], view["shared"]) == (True, True, True, False)


async def test_a_private_view_is_the_authors_alone_and_a_shared_one_the_teams(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    private = await save(stack, team, team.token, name="Mine")
    await save(stack, team, team.token, name="Ours", shared=True)
    other = await colleague(pool, stack, team)
    seen = await names(stack, team, other)
    assert set(seen) == {"Ours"}
    assert (seen["Ours"]["mine"], seen["Ours"]["editable"]) == (False, False)
    hidden = await send(stack, "PUT", f"/api/teams/{team.id}/views/{private}", other, {"name": "x", "view": VIEW})
    missing = await send(stack, "PUT", f"/api/teams/{team.id}/views/{2**62}", other, {"name": "x", "view": VIEW})
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json() == missing.json()


async def test_a_shared_view_is_changed_by_its_author_or_an_admin_only(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    shared = await save(stack, team, team.token, name="Ours", shared=True)
    member, admin = await colleague(pool, stack, team), await colleague(pool, stack, team, "admin")
    path = f"/api/teams/{team.id}/views/{shared}"
    refused = await send(stack, "PUT", path, member, {"name": "Theirs", "shared": True, "view": VIEW})
    assert refused.status_code == 403
    assert "author" in refused.json()["message"]
    assert (await send(stack, "DELETE", path, member)).status_code == 403
    renamed = await send(stack, "PUT", path, admin, {"name": "Renamed", "shared": True, "view": VIEW})
    assert renamed.status_code == 204
    assert set(await names(stack, team, team.token)) == {"Renamed"}
    assert (await send(stack, "DELETE", path, team.token)).status_code == 204
    assert await names(stack, team, team.token) == {}


async def test_a_member_makes_a_shared_view_their_default(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    shared = await save(stack, team, team.token, name="Ours", shared=True)
    member = await colleague(pool, stack, team)
    chosen = await send(stack, "PUT", f"/api/teams/{team.id}/views/default", member, {"view_id": shared})
    assert chosen.status_code == 204
    assert (await names(stack, team, member))["Ours"]["default"] is True
    assert (await names(stack, team, team.token))["Ours"]["default"] is False


async def test_another_teams_view_is_the_same_404_as_a_missing_one(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    other = await make_team(pool, stack.secret)
    theirs = await save(stack, other, other.token, shared=True)
    # the caller is a member of both teams: the view is named under the wrong one
    await pool.execute("insert into memberships (team_id, user_id) values ($1, $2)", other.id, team.user_id)
    wrong_team = await send(stack, "DELETE", f"/api/teams/{team.id}/views/{theirs}", team.token)
    missing = await send(stack, "DELETE", f"/api/teams/{team.id}/views/{2**62}", team.token)
    assert wrong_team.status_code == missing.status_code == 404
    assert wrong_team.json() == missing.json()
    not_member = await send(stack, "GET", f"/api/teams/{other.id}/views", (await make_team(pool, stack.secret)).token)
    assert not_member.status_code == 403


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"name": "", "view": VIEW}, "$.name"),
        ({"name": "   ", "view": VIEW}, "$.name"),
        ({"name": "two\nlines", "view": VIEW}, "$.name"),
        ({"name": "x", "view": {**VIEW, "columns": []}}, "$.view.columns"),
        ({"name": "x", "view": {**VIEW, "columns": [{"key": "salary"}]}}, "$.view.columns[0].key"),
        ({"name": "x", "view": {**VIEW, "columns": [{"key": "id", "width": 5}]}}, "$.view.columns[0].width"),
        ({"name": "x", "view": {**VIEW, "columns": [{"key": "id"}, {"key": "id"}]}}, "view.columns[1].key"),
        ({"name": "x", "view": {**VIEW, "sort": "eta"}}, "$.view.sort"),
        ({"name": "x", "view": {**VIEW, "filters": {"status": "lost"}}}, "$.view.filters.status"),
        ({"name": "x", "view": VIEW, "colour": "red"}, "colour"),
    ],
)
async def test_a_bad_view_is_a_422_naming_the_field(stack: Stack, team: Team, body: Any, says: str) -> None:
    answer = await send(stack, "POST", f"/api/teams/{team.id}/views", team.token, body)
    assert answer.status_code == 422, answer.text
    assert says in answer.json()["message"]


async def order(stack: Stack, team: Team, token: str) -> list[str]:
    answer = await send(stack, "GET", f"/api/teams/{team.id}/views", token)
    assert answer.status_code == 200, answer.text
    return [v["name"] for v in answer.json()["views"]]


async def test_each_member_keeps_the_views_in_their_own_order_and_a_rename_keeps_its_place(
    stack: Stack, pool: asyncpg.Pool
) -> None:
    team = await make_team(pool, stack.secret)
    other = await colleague(pool, stack, team)
    b = await save(stack, team, team.token, name="B view")
    a = await save(stack, team, team.token, name="A view", shared=True)
    c = await save(stack, team, team.token, name="C view")
    theirs = await save(stack, team, other, name="Their private")
    assert await order(stack, team, team.token) == ["A view", "B view", "C view"]  # by name until placed
    path = f"/api/teams/{team.id}/views/order"
    # Their private view's id is passed over, as one that does not exist would be.
    placed = await send(stack, "PUT", path, team.token, {"view_ids": [c, a, theirs, 999_999]})
    assert placed.status_code == 204, placed.text
    assert await order(stack, team, team.token) == ["C view", "A view", "B view"]  # the unplaced follow, by name
    assert await order(stack, team, other) == ["A view", "Their private"]  # the order is the person's alone
    # Renamed (PUT with the view as it was, a new name), a view keeps its place.
    listed = {v["id"]: v for v in (await send(stack, "GET", f"/api/teams/{team.id}/views", team.token)).json()["views"]}
    renamed = {k: listed[a][k] for k in ("shared", "default", "view")} | {"name": "Zed view"}
    assert (await send(stack, "PUT", f"/api/teams/{team.id}/views/{a}", team.token, renamed)).status_code == 204
    assert await order(stack, team, team.token) == ["C view", "Zed view", "B view"]
    # A view named twice is a 422; another team's member may not order this team's views.
    twice = await send(stack, "PUT", path, team.token, {"view_ids": [b, b]})
    assert twice.status_code == 422 and "view_ids[1]" in twice.json()["message"], twice.text
    stranger = await make_team(pool, stack.secret)
    assert (await send(stack, "PUT", path, stranger.token, {"view_ids": [b]})).status_code == 403
    # Deleted, a view leaves the order with its places.
    assert (await send(stack, "DELETE", f"/api/teams/{team.id}/views/{c}", team.token)).status_code == 204
    assert await order(stack, team, team.token) == ["Zed view", "B view"]


async def test_orders_sent_at_once_by_one_person_all_land_and_the_last_one_wins_whole(
    stack: Stack, pool: asyncpg.Pool
) -> None:
    """Two quick drags send two orders before the first is answered: each is a 204, none a 500 (the second's
    insert broke the places' primary key), and the views end in one of the orders sent, not a mix."""
    team = await make_team(pool, stack.secret)
    ids = {name: await save(stack, team, team.token, name=name) for name in ("A view", "B view", "C view")}
    path = f"/api/teams/{team.id}/views/order"
    orders = [["A view", "B view", "C view"], ["C view", "B view", "A view"], ["B view", "C view", "A view"]] * 4
    answers = await asyncio.gather(
        *(send(stack, "PUT", path, team.token, {"view_ids": [ids[name] for name in names]}) for names in orders)
    )
    assert [answer.status_code for answer in answers] == [204] * len(orders), [a.text for a in answers]
    assert await order(stack, team, team.token) in orders
