"""Every route of the app against every role: owner, admin, member, another team's member, and no token.

The decision is gateway.core.roles' table; a route the table does not name fails here, so a new route cannot be
added without one. A refusal is a 401 (no token) or a 403 with the JSON error a person reads; a call a role may
make is neither. Then the managing calls themselves: the rules a team's owners and admins meet, each a clear 4xx.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest
from starlette.routing import Route, WebSocketRoute

from gateway.config import Settings
from gateway.core import roles
from gateway.credentials import issue_token
from gateway.web.app import create_app
from tests.conftest import Stack
from tests.integration.conftest import Team, make_team


def app_routes() -> list[tuple[str, str]]:
    app = create_app(Settings(secret="x" * 32))
    found = []
    for route in app.routes:
        if isinstance(route, WebSocketRoute):
            found.append(("GET", route.path))
        elif isinstance(route, Route):
            found += [(m, route.path) for m in sorted((route.methods or set()) - {"HEAD"})]
    return found


ROUTES = app_routes()
ROLES = ["owner", "admin", "member", "foreign", "none", "platform"]  # platform: a platform administrator


def test_every_route_of_the_app_has_a_decision() -> None:
    missing = [r for r in ROUTES if r not in roles.ROUTE_ACCESS]
    assert missing == [], "name who may call these in gateway.core.roles.ROUTE_ACCESS"
    assert set(roles.ROUTE_ACCESS) == set(ROUTES), "the table names routes the app no longer has"


@dataclass
class World:
    team: Team
    tokens: dict[str, str]  # role -> a token of a user with that role in the team (foreign: another team's)
    user_ids: dict[str, int]
    analysis_id: int
    submission_id: int
    outsider_id: int  # a user in no team, whom managers add and remove
    spare_cluster_id: int


async def add_user(pool: asyncpg.Pool, secret: str, team_id: int, role: str) -> tuple[int, str]:
    user_id = await pool.fetchval("insert into users (name) values ($1) returning id", f"{role} {secrets.token_hex(3)}")
    await pool.execute("insert into memberships (team_id, user_id, role) values ($1, $2, $3)", team_id, user_id, role)
    return user_id, issue_token(secret, user_id, 3600)


async def build_world(pool: asyncpg.Pool, stack: Stack) -> World:
    team = await make_team(pool, stack.secret)  # its user is a member
    other = await make_team(pool, stack.secret)
    owner_id, owner = await add_user(pool, stack.secret, team.id, "owner")
    admin_id, admin = await add_user(pool, stack.secret, team.id, "admin")
    analysis_id = await pool.fetchval(
        "insert into analyses (trajectory_id, plugin) values ($1, 'RDF') returning id", team.trajectory_id
    )
    submission_id = await pool.fetchval(
        "insert into submissions (team_id, title) values ($1, 'water box') returning id", team.id
    )
    outsider_id = await pool.fetchval(
        "insert into users (name) values ($1) returning id", f"out {secrets.token_hex(3)}"
    )
    spare = await pool.fetchval("insert into clusters (team_id, name) values ($1, 'spare') returning id", team.id)
    platform_id = await pool.fetchval(
        "insert into users (name, platform_admin) values ($1, true) returning id", f"platform {secrets.token_hex(3)}"
    )
    return World(
        team,
        {
            "owner": owner,
            "admin": admin,
            "member": team.token,
            "foreign": other.token,
            "platform": issue_token(stack.secret, platform_id, 3600),
        },
        {"owner": owner_id, "admin": admin_id, "member": team.user_id},
        analysis_id,
        submission_id,
        outsider_id,
        spare,
    )


@pytest.fixture
async def world(pool: asyncpg.Pool, stack: Stack) -> World:
    """A team of its own, for a test that changes who its people are (removes the owner, adds the outsider)."""
    return await build_world(pool, stack)


@pytest.fixture(scope="module")
async def shared(pool: asyncpg.Pool, stack: Stack) -> World:
    """One team for the route x role matrix, built once: a call the matrix makes changes the outsider's
    membership, the spare cluster, a view, the submission or the analysis, never the roles of the people calling,
    so each decision is the one a fresh team would meet (a 401 and a 403 come before any lookup of those)."""
    return await build_world(pool, stack)


@pytest.fixture(scope="module")
async def client(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    """One client for the matrix's some 300 calls: making one costs tens of milliseconds (its TLS context)."""
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, timeout=30) as client:
        yield client


async def ask(
    client: httpx.AsyncClient, token: str | None, method: str, path: str, body: object = None
) -> httpx.Response:
    """A call with `token` alone (none: no token): the shared client forgets the cookie a renewal set."""
    client.cookies.clear()
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return await client.request(method, path, json=body, headers=headers)


def call_for(world: World, method: str, path: str) -> tuple[str, object]:
    """The route's path with real ids of the team, and a body it can take."""
    team = world.team
    if path.startswith("/api/teams/"):
        filled = path.replace("{id:int}", str(team.id))
    elif path.startswith("/api/trajectories/"):
        filled = path.replace("{id:int}", str(team.trajectory_id))
    elif path.startswith("/api/analyses/"):
        filled = path.replace("{id:int}", str(world.analysis_id))
    elif path.startswith("/api/account/sessions/"):  # no session of the caller's: revoking its own would end it
        filled = path.replace("{id:int}", str(2**62))
    else:
        filled = path.replace("{id:int}", "1")
    filled = filled.replace("{user:int}", str(world.outsider_id)).replace("{cluster:int}", str(world.spare_cluster_id))
    filled = filled.replace("{view:int}", "1")  # no such view: a 404 to those who may ask
    body: object = None
    if path == "/api/teams/{id:int}/members" and method == "POST":
        body = {"user": world.outsider_id, "role": "member"}
    elif path == "/api/teams/{id:int}/clusters" and method == "POST":
        body = {"name": "spare"}
    elif path.startswith("/api/submissions/actions"):
        body = {"action": "kill", "submissions": [world.submission_id]}
    elif path == "/api/teams/{id:int}/views" and method == "POST":
        body = {"name": "mine", "view": {"columns": [{"key": "id"}]}}
    elif path == "/api/teams/{id:int}/views/default":
        body = {"view_id": None}
    elif path == "/api/teams/{id:int}/views/{view:int}" and method == "PUT":
        body = {"name": "mine", "view": {"columns": [{"key": "id"}]}}
    elif path == "/api/account/preferences":
        body = {"finishes": "mine"}
    elif path == "/api/submissions/instance-types":
        filled += f"?submission={world.submission_id}"
    return filled, body


TEAM_ROUTES = [
    (m, p) for m, p in ROUTES if roles.ROUTE_ACCESS.get((m, p)) in (roles.SEE, roles.ACT, roles.MANAGE, roles.AUDIT)
]
PLATFORM = [(m, p) for m, p in ROUTES if roles.ROUTE_ACCESS.get((m, p)) == "platform"]
SIGNED_IN = [(m, p) for m, p in ROUTES if roles.ROUTE_ACCESS.get((m, p)) in ("user", "cluster") and p != "/ws"]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("method", "path"), TEAM_ROUTES, ids=[f"{m} {p}" for m, p in TEAM_ROUTES])
async def test_a_team_route_answers_each_role_as_the_table_says(
    client: httpx.AsyncClient, shared: World, method: str, path: str, role: str
) -> None:
    filled, body = call_for(shared, method, path)
    response = await ask(client, shared.tokens.get(role), method, filled, body)
    what = roles.ROUTE_ACCESS[(method, path)]
    if role == "none":
        assert response.status_code == 401, response.text
    elif role == "foreign" or not roles.may(None if role == "platform" else role, what, role == "platform"):
        assert response.status_code == 403, response.text
        assert response.json()["error"] == "forbidden" and response.json()["message"]
    else:
        assert response.status_code not in (401, 403) and response.status_code < 500, response.text


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("method", "path"), SIGNED_IN, ids=[f"{m} {p}" for m, p in SIGNED_IN])
async def test_a_cluster_or_account_route_answers_each_role(
    client: httpx.AsyncClient, shared: World, method: str, path: str, role: str
) -> None:
    filled, body = call_for(shared, method, path)
    response = await ask(client, shared.tokens.get(role), method, filled, body)
    if role == "none" or roles.ROUTE_ACCESS[(method, path)] == "cluster":  # a person's token is no cluster key
        assert response.status_code == 401, response.text
    else:
        assert response.status_code not in (401, 403) and response.status_code < 500, response.text


async def test_an_owner_adds_re_roles_and_removes_a_member_idempotently(
    client: httpx.AsyncClient, world: World
) -> None:
    owner, team, outsider = world.tokens["owner"], world.team.id, world.outsider_id
    added = await ask(client, owner, "POST", f"/api/teams/{team}/members", {"user": outsider, "role": "member"})
    assert added.status_code == 200 and added.json()["result"] == "added", added.text
    again = await ask(client, owner, "POST", f"/api/teams/{team}/members", {"user": outsider, "role": "member"})
    assert again.json()["result"] == "unchanged"
    changed = await ask(client, owner, "POST", f"/api/teams/{team}/members", {"user": outsider, "role": "admin"})
    assert changed.json()["result"] == "changed"
    members = (await ask(client, owner, "GET", f"/api/teams/{team}/members")).json()["members"]
    assert outsider in [m["id"] for m in members]
    gone = await ask(client, owner, "DELETE", f"/api/teams/{team}/members/{outsider}")
    assert gone.json()["removed"] is True
    gone_again = await ask(client, owner, "DELETE", f"/api/teams/{team}/members/{outsider}")
    assert gone_again.status_code == 200 and gone_again.json()["removed"] is False


async def test_a_user_is_found_by_name(client: httpx.AsyncClient, world: World, pool: asyncpg.Pool) -> None:
    name = await pool.fetchval("select name from users where id = $1", world.outsider_id)
    added = await ask(
        client, world.tokens["admin"], "POST", f"/api/teams/{world.team.id}/members", {"user": name, "role": "member"}
    )
    assert added.status_code == 200 and added.json()["user"] == world.outsider_id, added.text


@pytest.mark.parametrize(
    ("who", "body", "status", "error", "says"),
    [
        ("owner", {"user": "outsider", "role": "boss"}, 422, "invalid", "role: expected one of owner, admin, member"),
        ("owner", {"user": "nobody at all", "role": "member"}, 404, "not_found", "no user 'nobody at all'"),
        ("owner", {"user": 2**62, "role": "member"}, 404, "not_found", "no user"),
        ("owner", {"user": "owner", "role": "member"}, 409, "last_owner", "keeps at least one owner"),
        ("admin", {"user": "member", "role": "owner"}, 403, "forbidden", "only an owner may make or unmake"),
        ("admin", {"user": "owner", "role": "admin"}, 403, "forbidden", "only an owner may make or unmake"),
        ("owner", {"user": "outsider", "role": "member", "extra": 1}, 422, "invalid", "extra"),
        ("owner", {"user": "a\x00b", "role": "member"}, 422, "invalid", "NUL"),
    ],
    ids=[
        "unknown role",
        "missing user",
        "missing user id",
        "last owner",
        "admin makes owner",
        "admin unmakes owner",
        "unknown field",
        "NUL",
    ],
)
async def test_a_role_change_that_may_not_be_made_is_a_clear_4xx(
    client: httpx.AsyncClient, shared: World, who: str, body: dict[str, object], status: int, error: str, says: str
) -> None:
    world = shared  # each change is refused: the team stays as it was
    user = body["user"]
    if user in world.user_ids:
        body = {**body, "user": world.user_ids[str(user)]}
    elif user == "outsider":
        body = {**body, "user": world.outsider_id}
    response = await ask(client, world.tokens[who], "POST", f"/api/teams/{world.team.id}/members", body)
    assert response.status_code == status, response.text
    assert response.json()["error"] == error and says in response.json()["message"], response.json()


async def test_the_last_owner_cannot_be_removed_and_an_admin_cannot_remove_an_owner(
    client: httpx.AsyncClient, world: World
) -> None:
    team, owner_id = world.team.id, world.user_ids["owner"]
    by_admin = await ask(client, world.tokens["admin"], "DELETE", f"/api/teams/{team}/members/{owner_id}")
    assert by_admin.status_code == 403 and "only an owner may remove an owner" in by_admin.json()["message"]
    by_self = await ask(client, world.tokens["owner"], "DELETE", f"/api/teams/{team}/members/{owner_id}")
    assert by_self.status_code == 409 and by_self.json()["error"] == "last_owner"
    # With a second owner, the first may go.
    made = await ask(
        client,
        world.tokens["owner"],
        "POST",
        f"/api/teams/{team}/members",
        {"user": world.outsider_id, "role": "owner"},
    )
    assert made.json()["result"] == "added"
    gone = await ask(client, world.tokens["owner"], "DELETE", f"/api/teams/{team}/members/{owner_id}")
    assert gone.json()["removed"] is True


async def test_a_foreign_team_is_refused_whatever_its_ids(
    stack: Stack, client: httpx.AsyncClient, shared: World, pool: asyncpg.Pool
) -> None:
    world = shared  # both calls are refused
    other = await make_team(pool, stack.secret)
    body = {"user": world.outsider_id, "role": "member"}
    response = await ask(client, world.tokens["owner"], "POST", f"/api/teams/{other.id}/members", body)
    assert response.status_code == 403 and response.json()["message"] == "not a member of this team"
    foreign_cluster = await ask(
        client, world.tokens["owner"], "POST", f"/api/teams/{world.team.id}/clusters/{other.cluster_id}/key"
    )
    assert foreign_cluster.status_code == 404, foreign_cluster.text
    assert f"no cluster {other.cluster_id} in team {world.team.id}" in foreign_cluster.json()["message"]


async def test_a_cluster_is_added_with_its_key_shown_once_and_re_keyed(client: httpx.AsyncClient, world: World) -> None:
    owner, team = world.tokens["owner"], world.team.id
    made = (await ask(client, owner, "POST", f"/api/teams/{team}/clusters", {"name": "tpu-1"})).json()
    assert made["created"] is True and made["key"].startswith(f"c{made['id']}.")
    found = (await ask(client, owner, "POST", f"/api/teams/{team}/clusters", {"name": "tpu-1"})).json()
    assert found == {**made, "created": False, "key": None}
    metrics = {"cpu": 1, "memory": 1, "disk": 1, "network": 1}

    async def report(key: str) -> int:
        headers = {"Authorization": f"Bearer {key}"}
        return (await client.post("/api/ingest/metrics", json=metrics, headers=headers)).status_code

    assert await report(made["key"]) < 300
    rotated = await ask(client, world.tokens["admin"], "POST", f"/api/teams/{team}/clusters/{made['id']}/key")
    new_key = rotated.json()["key"]
    assert await report(made["key"]) == 401  # the old key stops working at once
    assert await report(new_key) < 300
    listed = (await ask(client, world.tokens["member"], "GET", f"/api/teams/{team}/clusters")).json()
    assert listed["role"] == "member" and "tpu-1" in [c["name"] for c in listed["clusters"]]
    removed = await ask(client, owner, "DELETE", f"/api/teams/{team}/clusters/{made['id']}")
    assert removed.json() == {"id": made["id"], "removed": True}
    again = await ask(client, owner, "DELETE", f"/api/teams/{team}/clusters/{made['id']}")
    assert again.json() == {"id": made["id"], "removed": False}


def admin_call(method: str, path: str, world: World) -> tuple[str, object]:
    body = {"name": f"made {secrets.token_hex(3)}"} if method == "POST" else None
    return path.replace("{id:int}", str(2**62)), body  # removing one that is not there changes nothing


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("method", "path"), PLATFORM, ids=[f"{m} {p}" for m, p in PLATFORM])
async def test_an_admin_route_answers_a_platform_administrator_only(
    client: httpx.AsyncClient, shared: World, method: str, path: str, role: str
) -> None:
    filled, body = admin_call(method, path, shared)
    response = await ask(client, shared.tokens.get(role), method, filled, body)
    if role == "none":
        assert response.status_code == 401, response.text
    elif role != "platform":
        assert response.status_code == 403, response.text
        assert response.json()["message"] == "only a platform administrator may manage teams and users"
    else:
        assert response.status_code == 200, response.text


async def test_a_platform_administrator_provisions_a_team_from_nothing(
    client: httpx.AsyncClient, shared: World
) -> None:
    """What `gateway team|user|member|cluster` does, over HTTP, run twice: the second run finds the first's."""
    token, tag = shared.tokens["platform"], secrets.token_hex(3)
    for run in range(2):
        team = (await ask(client, token, "POST", "/api/admin/teams", {"name": f"lab {tag}"})).json()
        ada = (await ask(client, token, "POST", "/api/admin/users", {"name": f"Ada {tag}"})).json()
        assert team["created"] is ada["created"] is (run == 0)
        owner = await ask(
            client, token, "POST", f"/api/teams/{team['id']}/members", {"user": ada["id"], "role": "owner"}
        )
        assert owner.json()["result"] == ("added" if run == 0 else "unchanged"), owner.text
        cluster = (await ask(client, token, "POST", f"/api/teams/{team['id']}/clusters", {"name": "gpu"})).json()
        assert (cluster["key"] is not None) is (run == 0)
    teams = (await ask(client, token, "GET", "/api/admin/teams")).json()["teams"]
    assert {"id": team["id"], "name": f"lab {tag}", "members": 1, "clusters": 1, "jobs": 0} in teams
    # It manages the team, and does not see its jobs: it is not one of its members.
    seen = await ask(client, token, "GET", f"/api/teams/{team['id']}/trajectories")
    assert seen.status_code == 403
    gone = await ask(client, token, "DELETE", f"/api/admin/teams/{team['id']}")
    assert gone.json() == {"id": team["id"], "removed": True}
    assert (await ask(client, token, "DELETE", f"/api/admin/teams/{team['id']}")).json()["removed"] is False
    refused = await ask(client, token, "POST", "/api/admin/users", {"name": "a\x00b"})
    assert refused.status_code == 422 and "NUL" in refused.json()["message"]
