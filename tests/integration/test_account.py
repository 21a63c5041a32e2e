"""The account page's API on live nodes: a person's teams and role in each, the sessions they are signed in with
(device, last seen, this one marked), and revoking one: it ends on every node, its sockets close, and nobody
can revoke or even see another person's sessions."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import asyncpg
import httpx
import pytest
import websockets

from gateway.hub.sessions import WRITE_EVERY
from gateway.web.people.auth import issue_token
from tests.conftest import Process, Stack
from tests.integration.conftest import Team, make_team
from tests.integration.test_sessions import EVIL, closed_with, origin, refused_until, revoke_cli

DEADLINE = 10.0
FIREFOX = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0"
CHROME = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0.0.0 Safari/537.36"


def client(node: Process, token: str, user_agent: str = CHROME) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=node.http, headers={"Authorization": f"Bearer {token}", "User-Agent": user_agent}, timeout=10
    )


async def account(node: Process, token: str, user_agent: str = CHROME) -> dict[str, Any]:
    async with client(node, token, user_agent) as c:
        answer = await c.get("/api/account")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def revoke(node: Process, token: str, session_id: int, **headers: str) -> httpx.Response:
    async with client(node, token) as c:
        return await c.post(f"/api/account/sessions/{session_id}/revoke", headers=headers)


def devices(body: dict[str, Any]) -> dict[str, bool]:
    """Each listed session's device -> whether it is the session asking."""
    return {s["device"]: s["current"] for s in body["sessions"]}


async def test_the_account_lists_the_teams_with_a_role_each_and_the_sessions_with_this_one_marked(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    other = await make_team(pool, stack.secret)
    await pool.execute(
        "insert into memberships (team_id, user_id, role) values ($1, $2, 'owner')", other.id, team.user_id
    )
    node = stack.nodes[0]
    # The browser signs in through the link's confirmation; a tool uses a token of its own.
    async with httpx.AsyncClient(base_url=node.http, headers={"User-Agent": FIREFOX}) as browser:
        signed_in = await browser.post(
            "/sign-in", data={"token": team.token, "next": "/"}, headers={"Origin": origin(node)}
        )
        assert signed_in.status_code == 303
        tool = issue_token(stack.secret, team.user_id, 3600)
        assert devices(await account(stack.nodes[1], tool, "python-httpx/0.27.0")) == {
            "Firefox on Windows": False,
            "python-httpx": True,
        }
        body = (await browser.get("/api/account")).json()
    names = await pool.fetch("select id, name from teams where id = any($1::bigint[])", [team.id, other.id])
    expected = sorted(
        ({"id": r["id"], "name": r["name"], "role": "member" if r["id"] == team.id else "owner"} for r in names),
        key=lambda t: (t["name"], t["id"]),
    )
    assert body["teams"] == expected  # a plain insert naming only the team and the user makes a member
    assert body["user"]["id"] == team.user_id and body["sessions_total"] == 2
    first, second = body["sessions"]  # the one asking was seen last
    assert (first["device"], first["current"]) == ("Firefox on Windows", True)
    assert (second["device"], second["current"]) == ("python-httpx", False)
    assert abs(body["time"] / 1000 - time.time()) < 60


async def test_revoking_another_session_ends_it_on_every_node_and_closes_its_sockets(stack: Stack, team: Team) -> None:
    laptop = issue_token(stack.secret, team.user_id, 3600)
    await account(stack.nodes[1], laptop, FIREFOX)  # listed
    headers = {"Authorization": f"Bearer {laptop}"}
    async with (
        websockets.connect(stack.nodes[0].ws, additional_headers=headers) as here,
        websockets.connect(stack.nodes[1].ws, additional_headers=headers) as there,
    ):
        for ws in (here, there):
            await ws.send(json.dumps({"type": "ping", "id": 1}))
            assert json.loads(await asyncio.wait_for(ws.recv(), DEADLINE))["type"] == "pong"
        listed = await account(stack.nodes[0], team.token)
        (session,) = [s for s in listed["sessions"] if not s["current"]]
        answer = await revoke(stack.nodes[0], team.token, session["id"], Origin=origin(stack.nodes[0]))
        assert answer.status_code == 200 and answer.json() == {"ok": True}
        assert "set-cookie" not in answer.headers  # another session's: this one stays signed in
        assert await asyncio.gather(closed_with(here), closed_with(there)) == [4001, 4001]
    for node in stack.nodes:
        await refused_until(node, laptop, "token revoked")
    after = await account(stack.nodes[1], team.token)
    assert devices(after) == {"Chrome on Linux": True}
    again = await revoke(stack.nodes[1], team.token, session["id"])
    assert again.status_code == 404


async def test_another_persons_session_can_be_neither_seen_nor_revoked(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """The attack: a member of another team, or of the same one, names someone else's session id."""
    victim = await make_team(pool, stack.secret)
    colleague = await pool.fetchval("insert into users (name) values ('colleague') returning id")
    await pool.execute("insert into memberships values ($1, $2)", team.id, colleague)
    colleague_token = issue_token(stack.secret, colleague, 3600)
    victims = (await account(stack.nodes[0], victim.token))["sessions"]
    (target,) = [s["id"] for s in victims]
    missing = 2**62
    for attacker in (team.token, colleague_token):
        for session_id in (target, missing):  # the same answer whether it is someone else's or does not exist
            answer = await revoke(stack.nodes[1], attacker, session_id)
            assert (answer.status_code, answer.json()) == (
                404,
                {"error": "not_found", "message": f"no active session {session_id} of yours"},
            )
        assert target not in {s["id"] for s in (await account(stack.nodes[1], attacker))["sessions"]}
    for node in stack.nodes:
        assert (await account(node, victim.token))["sessions"][0]["id"] == target  # still signed in


async def test_revoking_asks_for_a_token_and_our_own_origin(stack: Stack, team: Team) -> None:
    session_id = (await account(stack.nodes[0], team.token))["sessions"][0]["id"]
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as anonymous:
        assert (await anonymous.post(f"/api/account/sessions/{session_id}/revoke")).status_code == 401
        assert (await anonymous.get("/api/account")).status_code == 401
    foreign = await revoke(stack.nodes[0], team.token, session_id, Origin=EVIL)
    assert foreign.status_code == 403 and foreign.json()["error"] == "origin_not_allowed"
    assert (await account(stack.nodes[1], team.token))["sessions"][0]["id"] == session_id  # nothing happened


async def test_revoking_this_session_signs_this_browser_out_on_every_node(stack: Stack, team: Team) -> None:
    node = stack.nodes[0]
    async with httpx.AsyncClient(base_url=node.http, cookies={"gateway_token": team.token}) as browser:
        (mine,) = (await browser.get("/api/account")).json()["sessions"]
        assert mine["current"]
        answer = await browser.post(f"/api/account/sessions/{mine['id']}/revoke", headers={"Origin": origin(node)})
        assert answer.status_code == 200 and 'gateway_token=""' in answer.headers["set-cookie"]
    for each in stack.nodes:  # the old cookie no longer works anywhere
        async with httpx.AsyncClient(base_url=each.http, cookies={"gateway_token": team.token}) as old:
            deadline = time.monotonic() + DEADLINE
            while (refused := await old.get("/api/me")).status_code != 401:
                assert time.monotonic() < deadline, refused.status_code
                await asyncio.sleep(0.05)
            assert refused.json() == {"error": "unauthorized", "message": "token revoked"}


async def test_signing_out_takes_the_session_off_the_list(stack: Stack, team: Team) -> None:
    phone = issue_token(stack.secret, team.user_id, 3600)
    await account(stack.nodes[0], phone, FIREFOX)
    assert len((await account(stack.nodes[1], team.token))["sessions"]) == 2
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, cookies={"gateway_token": phone}) as browser:
        assert (await browser.post("/api/sign-out")).status_code == 200
        assert (await browser.get("/api/account")).status_code == 401
    assert devices(await account(stack.nodes[1], team.token)) == {"Chrome on Linux": True}


async def test_a_session_seen_only_by_its_socket_is_listed_within_seconds(stack: Stack, team: Team) -> None:
    socket_only = issue_token(stack.secret, team.user_id, 3600)
    async with websockets.connect(
        stack.nodes[1].ws,
        additional_headers={"Authorization": f"Bearer {socket_only}"},
        user_agent_header="volt-sync/2",
    ) as ws:
        await ws.send(json.dumps({"type": "ping", "id": 1}))
        await asyncio.wait_for(ws.recv(), DEADLINE)
        deadline = time.monotonic() + WRITE_EVERY + DEADLINE
        while "volt-sync" not in devices(listed := await account(stack.nodes[0], team.token)):
            assert time.monotonic() < deadline, listed
            await asyncio.sleep(0.2)


async def test_expired_sessions_and_those_a_user_revocation_ended_are_not_listed(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    # A session that expires as sessions do, by its token's time (expiring it by hand raced the node's write of
    # its last use, which puts a session's own expiry back): gone from the list once expired.
    old = issue_token(stack.secret, team.user_id, 4)
    await account(stack.nodes[0], old, FIREFOX)
    deadline = time.monotonic() + 60
    while (listed := devices(await account(stack.nodes[0], team.token))) != {"Chrome on Linux": True}:
        assert time.monotonic() < deadline and set(listed) <= {"Chrome on Linux", "Firefox on Windows"}, listed
        await asyncio.sleep(0.2)
    await revoke_cli(stack, "--user", str(team.user_id))
    await refused_until(stack.nodes[1], team.token, "token revoked")
    later = issue_token(stack.secret, team.user_id, 3600, started=time.time() + 1)  # signed in again afterwards
    assert devices(await account(stack.nodes[1], later, FIREFOX)) == {"Firefox on Windows": True}


async def test_a_role_is_one_the_account_page_knows(pool: asyncpg.Pool, stack: Stack, team: Team) -> None:
    with pytest.raises(asyncpg.CheckViolationError):
        await pool.execute("update memberships set role = 'root' where team_id = $1", team.id)


async def test_each_sign_in_by_the_picker_is_a_session_of_its_own(demo_node: Process, team: Team) -> None:
    async with (
        httpx.AsyncClient(base_url=demo_node.http, headers={"User-Agent": FIREFOX}) as laptop,
        httpx.AsyncClient(base_url=demo_node.http, headers={"User-Agent": CHROME}) as desktop,
    ):
        for browser in (laptop, desktop):
            assert (await browser.post("/api/sign-in", json={"user_id": team.user_id})).status_code == 200
        assert devices((await laptop.get("/api/account")).json()) == {
            "Firefox on Windows": True,
            "Chrome on Linux": False,
        }
        assert (await desktop.post("/api/sign-out")).status_code == 200
        assert devices((await laptop.get("/api/account")).json()) == {"Firefox on Windows": True}
        assert (await desktop.get("/api/sign-in/users")).status_code == 200  # the picker again


async def test_the_choice_of_finishes_follows_the_person_to_every_node_and_browser(stack: Stack, team: Team) -> None:
    """Chosen on one node, the choice is in the account and in /api/me on another: it is kept on the server."""
    assert (await account(stack.nodes[0], team.token))["preferences"] == {"finishes": "mine"}  # the default
    async with client(stack.nodes[0], team.token) as c:
        chosen = await c.put("/api/account/preferences", json={"finishes": "team"})
        assert chosen.status_code == 200 and chosen.json() == {"finishes": "team"}, chosen.text
        for wrong in ({"finishes": "everyone"}, {"finishes": "none", "other": 1}, {}):
            refused = await c.put("/api/account/preferences", json=wrong)
            assert refused.status_code == 422 and refused.json()["error"] == "invalid", refused.text
    assert (await account(stack.nodes[1], team.token))["preferences"] == {"finishes": "team"}
    async with client(stack.nodes[1], team.token) as c:
        assert (await c.get("/api/me")).json()["finishes"] == "team"
        assert (await c.put("/api/account/preferences", json={"finishes": "none"})).status_code == 200
        foreign = await c.put("/api/account/preferences", json={"finishes": "mine"}, headers={"Origin": EVIL})
        assert foreign.status_code == 403
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as anonymous:
        assert (await anonymous.put("/api/account/preferences", json={"finishes": "mine"})).status_code == 401
    assert (await account(stack.nodes[0], team.token))["preferences"] == {"finishes": "none"}


async def test_a_change_of_choice_reaches_every_open_socket_of_the_person_at_once(
    stack: Stack, team: Team, pool: asyncpg.Pool
) -> None:
    """Chosen in one tab, the choice is told over the websocket to the person's other tabs on every node (a
    `preferences` message), and to nobody else's."""
    teammate = int(await pool.fetchval("insert into users (name) values ('Grace Hopper') returning id"))
    await pool.execute("insert into memberships values ($1, $2)", team.id, teammate)
    other = issue_token(stack.secret, teammate, 3600)
    mine = {"Authorization": f"Bearer {team.token}"}
    async with (
        websockets.connect(stack.nodes[0].ws, additional_headers=mine) as here,
        websockets.connect(stack.nodes[1].ws, additional_headers=mine) as there,
        websockets.connect(stack.nodes[0].ws, additional_headers={"Authorization": f"Bearer {other}"}) as theirs,
    ):
        for ws in (here, there, theirs):  # each socket is open and heard before the choice
            await ws.send(json.dumps({"type": "ping", "id": 1}))
            assert json.loads(await asyncio.wait_for(ws.recv(), DEADLINE))["type"] == "pong"
        async with client(stack.nodes[0], team.token) as c:
            assert (await c.put("/api/account/preferences", json={"finishes": "team"})).status_code == 200
        for ws in (here, there):
            told = json.loads(await asyncio.wait_for(ws.recv(), DEADLINE))
            assert told == {"type": "preferences", "finishes": "team"}
        # The teammate's socket hears nothing of it: its next message is the answer to its own ping.
        await theirs.send(json.dumps({"type": "ping", "id": 2}))
        assert json.loads(await asyncio.wait_for(theirs.recv(), DEADLINE))["type"] == "pong"
        async with client(stack.nodes[1], team.token) as c:
            assert (await c.put("/api/account/preferences", json={"finishes": "mine"})).status_code == 200
        for ws in (here, there):
            told = json.loads(await asyncio.wait_for(ws.recv(), DEADLINE))
            assert told == {"type": "preferences", "finishes": "mine"}
