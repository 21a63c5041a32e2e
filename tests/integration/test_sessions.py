"""Sessions: a sign-in link asks before it signs in, sign-out and sign-in check Origin, `gateway revoke` ends
sessions on every node, renewals stop at the maximum age, and only `?token=` spelled so is a token."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import asyncpg
import httpx
import jwt
import pytest
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from gateway.hub.revocations import RELOAD_EVERY
from gateway.web.people.auth import issue_token, read_token
from tests.conftest import Process, Stack
from tests.integration.conftest import Team

EVIL = "https://evil.example"
DEADLINE = 10.0  # a revocation reaches every node within a second; generous for a loaded machine


def origin(node: Process) -> str:
    return f"http://127.0.0.1:{node.port}"


async def revoke_cli(stack: Stack, *args: str) -> str:
    """`gateway revoke ...` as an operator runs it, with the stack's database and Redis."""
    env = {**os.environ, "DATABASE_URL": stack.database_url, "REDIS_URL": stack.redis_url}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.cli",
        "revoke",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, out.decode()
    return out.decode()


async def closed_with(ws: websockets.ClientConnection, timeout: float = DEADLINE) -> int | None:
    with pytest.raises(ConnectionClosed) as info:
        while True:
            await asyncio.wait_for(ws.recv(), timeout)
    return info.value.rcvd.code if info.value.rcvd is not None else None


async def me(node: Process, token: str) -> httpx.Response:
    async with httpx.AsyncClient(base_url=node.http) as client:
        return await client.get("/api/me", headers={"Authorization": f"Bearer {token}"})


async def refused_until(node: Process, token: str, message: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while (answer := await me(node, token)).status_code != 401:
        assert time.monotonic() < deadline, f"{node.name} still takes the token: {answer.status_code}"
        await asyncio.sleep(0.05)
    assert answer.json() == {"error": "unauthorized", "message": message}


async def test_a_sign_in_link_asks_whom_it_signs_in_as_and_sets_no_cookie(stack: Stack, team: Team) -> None:
    node = stack.nodes[0]
    async with httpx.AsyncClient(base_url=node.http) as client:
        page = await client.get(f"/submissions?token={team.token}")
        assert page.status_code == 200 and "set-cookie" not in page.headers
        name = (await me(node, team.token)).json()["user"]["name"]
        assert f"Sign in as {name}?" in page.text and 'method="post" action="/sign-in"' in page.text
        assert page.headers["cache-control"] == "no-store"
        assert "<script>" not in page.text and "frame-ancestors 'none'" in page.headers["content-security-policy"]

        confirmed = await client.post(
            "/sign-in", data={"token": team.token, "next": "/submissions"}, headers={"Origin": origin(node)}
        )
        assert confirmed.status_code == 303 and confirmed.headers["location"] == "/submissions"
        cookie = confirmed.headers["set-cookie"]
        assert (
            cookie.startswith(f"gateway_token={team.token};") and "HttpOnly" in cookie and "SameSite=strict" in cookie
        )
        assert "Secure" not in cookie  # plain HTTP, and no proxy said otherwise
        assert (await client.get("/api/me")).json()["user"]["id"] == team.user_id

        elsewhere = await client.post(
            "/sign-in", data={"token": team.token, "next": "https://evil.example/"}, headers={"Origin": origin(node)}
        )
        assert elsewhere.headers["location"] == "/"  # a sign-in never leads to another site


async def test_a_sign_in_link_with_a_bad_token_says_so_without_asking(stack: Stack, team: Team) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        answer = await client.get(f"/?token={team.token}x")
    assert answer.status_code == 303 and answer.headers["location"] == "/?signin=expired"


@pytest.mark.parametrize("sender", [EVIL, "null", None])
async def test_confirming_a_sign_in_from_anywhere_but_the_page_is_refused(
    stack: Stack, team: Team, sender: str | None
) -> None:
    """Login CSRF: another site's form posting the attacker's token must not sign the victim's browser in."""
    headers = {"Origin": sender} if sender else {}
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        answer = await client.post("/sign-in", data={"token": team.token, "next": "/"}, headers=headers)
    assert answer.status_code == 403 and "set-cookie" not in answer.headers
    assert answer.json() == {"error": "origin_not_allowed", "message": "sign in from this gateway's own page"}


async def test_a_proxy_saying_https_gets_a_secure_cookie(stack: Stack, team: Team) -> None:
    node = stack.nodes[0]
    async with httpx.AsyncClient(base_url=node.http) as client:
        answer = await client.post(
            "/sign-in",
            data={"token": team.token, "next": "/"},
            headers={"Origin": f"https://127.0.0.1:{node.port}", "X-Forwarded-Proto": "https"},
        )
    assert answer.status_code == 303 and "Secure" in answer.headers["set-cookie"]


async def test_signing_out_checks_origin_then_revokes_the_session_on_every_node(stack: Stack, team: Team) -> None:
    node = stack.nodes[0]
    async with httpx.AsyncClient(base_url=node.http, cookies={"gateway_token": team.token}) as browser:
        foreign = await browser.post("/api/sign-out", headers={"Origin": EVIL})
        assert foreign.status_code == 403 and foreign.json()["error"] == "origin_not_allowed"
        assert (await me(node, team.token)).status_code == 200  # nothing happened
        signed_out = await browser.post("/api/sign-out", headers={"Origin": origin(node)})
        assert signed_out.status_code == 200 and 'gateway_token=""' in signed_out.headers["set-cookie"]
    for each in stack.nodes:
        await refused_until(each, team.token, "token revoked")


async def test_revoking_a_user_closes_live_sockets_with_4001_and_refuses_the_token_everywhere(
    stack: Stack, team: Team
) -> None:
    headers = {"Authorization": f"Bearer {team.token}"}
    async with (
        websockets.connect(stack.nodes[0].ws, additional_headers=headers) as here,
        websockets.connect(stack.nodes[1].ws, additional_headers=headers) as there,
    ):
        for ws in (here, there):  # both handed over and serving
            await ws.send(json.dumps({"type": "ping", "id": 1}))
            assert json.loads(await asyncio.wait_for(ws.recv(), DEADLINE))["type"] == "pong"
        out = await revoke_cli(stack, "--user", str(team.user_id))
        assert f"revoked every session of user {team.user_id}" in out
        codes = await asyncio.gather(closed_with(here), closed_with(there))
    assert codes == [4001, 4001]
    for node in stack.nodes:
        with pytest.raises(InvalidStatus) as info:
            async with websockets.connect(node.ws, additional_headers=headers):
                pass
        assert info.value.response.status_code == 401
        assert json.loads(info.value.response.body) == {"error": "unauthorized", "message": "token revoked"}
        await refused_until(node, team.token, "token revoked")
    later = issue_token(stack.secret, team.user_id, 3600, started=time.time() + 1)  # signed in again afterwards
    assert (await me(stack.nodes[1], later)).status_code == 200


async def test_revoking_a_token_id_ends_that_session_only(stack: Stack, team: Team) -> None:
    other = issue_token(stack.secret, team.user_id, 3600)
    headers = {"Authorization": f"Bearer {team.token}"}
    async with (
        websockets.connect(stack.nodes[1].ws, additional_headers=headers) as ws,
        websockets.connect(stack.nodes[1].ws, additional_headers={"Authorization": f"Bearer {other}"}) as kept,
    ):
        await ws.send(json.dumps({"type": "ping", "id": 1}))
        await asyncio.wait_for(ws.recv(), DEADLINE)
        await revoke_cli(stack, "--token-id", read_token(stack.secret, team.token).token_id)
        assert await closed_with(ws) == 4001
        await kept.send(json.dumps({"type": "ping", "id": 2}))
        assert json.loads(await asyncio.wait_for(kept.recv(), DEADLINE))["id"] == 2
    await refused_until(stack.nodes[0], team.token, "token revoked")
    assert (await me(stack.nodes[0], other)).status_code == 200


async def test_a_revocation_whose_broadcast_was_lost_is_found_by_the_nodes_reload(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    async with websockets.connect(
        stack.nodes[0].ws, additional_headers={"Authorization": f"Bearer {team.token}"}
    ) as ws:
        await ws.send(json.dumps({"type": "ping", "id": 1}))
        await asyncio.wait_for(ws.recv(), DEADLINE)
        await pool.execute(
            "insert into token_revocations (user_id) values ($1)", team.user_id
        )  # stored, never broadcast
        assert await closed_with(ws, RELOAD_EVERY + DEADLINE) == 4001
    for node in stack.nodes:
        await refused_until(node, team.token, "token revoked", RELOAD_EVERY + DEADLINE)


async def test_a_renewal_keeps_the_session_and_never_outlives_its_maximum_age(stack: Stack, team: Team) -> None:
    max_age = 7 * 24 * 3600  # the default GATEWAY_SESSION_MAX_AGE
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        renewed = await client.post("/api/session/renew", headers={"Authorization": f"Bearer {team.token}"})
        assert renewed.status_code == 200
        before, after = read_token(stack.secret, team.token), read_token(stack.secret, renewed.cookies["gateway_token"])
        assert (after.token_id, after.started) == (before.token_id, before.started)

        started = time.time() - max_age + 600  # ten minutes left
        nearly = issue_token(stack.secret, team.user_id, 300, started=started)
        capped = await client.post("/api/session/renew", headers={"Authorization": f"Bearer {nearly}"})
        assert capped.status_code == 200 and capped.json()["expires_at"] <= (int(started) + max_age) * 1000

        too_old = issue_token(stack.secret, team.user_id, 3600, started=time.time() - max_age - 60)
        refused = await client.post("/api/session/renew", headers={"Authorization": f"Bearer {too_old}"})
        assert refused.status_code == 401
        assert refused.json() == {"error": "unauthorized", "message": "session too old: sign in again"}


async def test_a_percent_encoded_token_name_is_no_token_and_never_reaches_the_logs(stack: Stack, team: Team) -> None:
    node = stack.nodes[1]
    async with httpx.AsyncClient(base_url=node.http) as client:
        answer = await client.get(f"/api/me?tok%65n={team.token}")
        assert answer.status_code == 401 and answer.json()["message"] == "missing token"
        page = await client.get(f"/?tok%65n={team.token}")
        assert page.status_code == 200 and "Sign in as" not in page.text and "set-cookie" not in page.headers
    with pytest.raises(InvalidStatus) as info:
        async with websockets.connect(f"{node.ws}?tok%65n={team.token}"):
            pass
    assert info.value.response.status_code == 401
    await me(node, team.token)  # a request after them: their log lines are written by now
    for process in (*stack.nodes, stack.relay):
        assert team.token not in process.output() and team.token.split(".")[1] not in process.output()
    assert "tok%65n=[redacted]" in node.output()


def forged(stack: Stack, team: Team, case: str) -> str:
    """A token signed with the stack's own secret, its claims set by hand: only a holder of the secret
    can make it, and the gateway must still refuse it, never read it as someone else nor fail with a 500."""
    now = int(time.time())
    user = str(team.user_id)
    claims: dict[str, object] = {"sub": user, "iat": now, "exp": now + 3600, "jti": "forged", "auth_time": now}
    if case == "session-in-the-future":  # would never grow too old, nor be ended by `gateway revoke --user`
        claims["auth_time"] = now + 86400
    elif case == "issued-in-the-future":
        claims["iat"] = claims["auth_time"] = now + 3600
    elif case == "underscore":  # int() reads "1_0" as 10
        claims["sub"] = f"{user[:-1]}_{user[-1]}" if len(user) > 1 else f"0_{user}"
    elif case == "space":
        claims["sub"] = f" {user}"
    elif case == "leading-zero":
        claims["sub"] = f"0{user}"
    elif case == "beyond-bigint":  # was a 500: PostgreSQL's bigint cannot hold it
        claims["sub"] = str(2**70)
    elif case == "nan-session":
        claims["auth_time"] = float("nan")
    return jwt.encode(claims, stack.secret, algorithm="HS256")


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("session-in-the-future", "token issued in the future: check the clocks"),
        ("issued-in-the-future", "token issued in the future: check the clocks"),
        ("underscore", "invalid token"),
        ("space", "invalid token"),
        ("leading-zero", "invalid token"),
        ("beyond-bigint", "invalid token"),
        ("nan-session", "invalid token"),
    ],
)
async def test_a_token_signed_with_the_secret_but_making_no_sense_is_refused_everywhere(
    stack: Stack, team: Team, case: str, message: str
) -> None:
    token = forged(stack, team, case)
    node = stack.nodes[0]
    answer = await me(node, token)
    assert (answer.status_code, answer.json()) == (401, {"error": "unauthorized", "message": message})
    with pytest.raises(InvalidStatus) as info:
        async with websockets.connect(node.ws, additional_headers={"Authorization": f"Bearer {token}"}):
            pass
    assert info.value.response.status_code == 401
    assert json.loads(info.value.response.body) == {"error": "unauthorized", "message": message}
    async with httpx.AsyncClient(base_url=node.http) as client:  # a sign-in link with it asks nobody
        link = await client.get("/", params={"token": token})
    assert (link.status_code, link.headers["location"]) == (303, "/?signin=expired")
    assert (await me(node, team.token)).status_code == 200  # the real token still works
