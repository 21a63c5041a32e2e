"""Limits and sessions: each gives a clear error or close code, and the process keeps serving everyone."""

from __future__ import annotations

import asyncio
import json
import os

import asyncpg
import httpx
import pytest
import websockets
from websockets.exceptions import ConnectionClosed, InvalidStatus

from gateway.embedded import free_port
from gateway.web.people.auth import issue_token
from harness.follower import Follower
from tests.conftest import Stack, spawn, wait_http
from tests.integration.conftest import Team


async def test_a_connection_whose_token_expires_is_closed_with_4001(stack: Stack, team: Team) -> None:
    short = issue_token(stack.secret, team.user_id, 2)
    async with websockets.connect(stack.nodes[0].ws, additional_headers={"Authorization": f"Bearer {short}"}) as ws:
        with pytest.raises(ConnectionClosed) as info:
            while True:
                await asyncio.wait_for(ws.recv(), 6)
    assert info.value.rcvd is not None and (info.value.rcvd.code, info.value.rcvd.reason) == (4001, "token expired")


async def test_a_session_is_renewed_without_a_reload(stack: Stack, team: Team) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        response = await client.post("/api/session/renew", headers={"Authorization": f"Bearer {team.token}"})
        assert response.status_code == 200 and response.json()["expires_at"] > response.json()["time"]
        cookie = response.cookies.get("gateway_token")
        assert cookie and cookie != team.token
        async with httpx.AsyncClient(base_url=stack.nodes[0].http, cookies={"gateway_token": cookie}) as browser:
            assert (await browser.get("/api/me")).json()["user"]["id"] == team.user_id
        expired = issue_token(stack.secret, team.user_id, -1)
        assert (
            await client.post("/api/session/renew", headers={"Authorization": f"Bearer {expired}"})
        ).status_code == 401


async def test_flooding_messages_get_rate_limited_then_closed_and_others_keep_being_served(
    stack: Stack, team: Team
) -> None:
    headers = {"Authorization": f"Bearer {team.token}"}
    async with Follower(stack.nodes[1].ws, team.token) as calm:
        async with websockets.connect(stack.nodes[1].ws, additional_headers=headers) as flood:
            for i in range(1500):
                await flood.send(json.dumps({"type": "ping", "id": i}))
            seen = []
            with pytest.raises(ConnectionClosed) as info:
                while True:
                    seen.append(json.loads(await asyncio.wait_for(flood.recv(), 10)))
            assert info.value.rcvd is not None and info.value.rcvd.code == 4029
            assert any(m.get("code") == "rate_limited" for m in seen)
        await calm.subscribe(f"team:{team.id}")
        await calm.wait_for(lambda f: f.channels[f"team:{team.id}"].snapshot_done)


async def test_connections_per_user_are_bounded(
    stack: Stack, team: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_MAX_CONNECTIONS_PER_USER": "2",
    }
    node = spawn("node-limited", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("limited"), port)
    try:
        await asyncio.to_thread(wait_http, node)
        headers = {"Authorization": f"Bearer {team.token}"}
        async with (
            websockets.connect(node.ws, additional_headers=headers),
            websockets.connect(node.ws, additional_headers=headers),
        ):
            with pytest.raises(InvalidStatus) as info:
                async with websockets.connect(node.ws, additional_headers=headers):
                    pass
            assert info.value.response.status_code == 429
            assert json.loads(info.value.response.body)["error"] == "too_many_connections"
    finally:
        node.stop()


async def test_too_many_subscriptions_get_a_clear_error(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    ids = [
        await pool.fetchval("insert into trajectories (team_id, name) values ($1, $2) returning id", team.id, f"t{i}")
        for i in range(101)
    ]
    async with Follower(stack.nodes[0].ws, team.token) as f:
        for trajectory_id in ids:
            await f.subscribe(f"trajectory:{trajectory_id}")
        await f.wait_for(lambda f: any(e["code"] == "too_many_subscriptions" for e in f.errors), timeout=20)
        assert [e["message"] for e in f.errors] == ["at most 100 subscriptions per connection"]


async def test_a_reconnect_storm_is_admitted_at_a_bounded_rate_and_nobody_starves(
    stack: Stack, team: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_ADMISSION_RATE": "50",
        "GATEWAY_ADMISSION_SHARE": "1",  # the storm's 150 clients are one user's
        "GATEWAY_MAX_CONNECTIONS_PER_USER": "1000",
    }
    node = spawn("node-storm", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("storm"), port)
    told_to_wait = 0
    try:
        await asyncio.to_thread(wait_http, node)
        headers = {"Authorization": f"Bearer {team.token}"}

        async def client() -> websockets.ClientConnection:
            nonlocal told_to_wait
            while True:
                try:
                    return await websockets.connect(node.ws, additional_headers=headers)
                except InvalidStatus as exc:
                    assert exc.response.status_code == 503
                    told_to_wait += 1
                    await asyncio.sleep(json.loads(exc.response.body)["retry_after_ms"] / 1000)

        loop = asyncio.get_running_loop()
        started = loop.time()
        sockets = await asyncio.wait_for(asyncio.gather(*(client() for _ in range(150))), 60)
        took = loop.time() - started
        assert len(sockets) == 150 and told_to_wait > 0
        assert took >= 1.5  # 150 clients at 50 a second (after a burst of 50) cannot all get in at once

        async def alive(ws: websockets.ClientConnection) -> str:
            await ws.send(json.dumps({"type": "ping", "id": 1}))
            answer = json.loads(await asyncio.wait_for(ws.recv(), 10))["type"]
            await ws.close()
            return answer

        assert set(await asyncio.gather(*(alive(ws) for ws in sockets))) == {"pong"}
    finally:
        node.stop()


FLOOD_SECONDS = 6.0  # the tokenless flood, bounded in time ...
FLOOD_MOST = 6000  # ... and in count (loopback only)
SANE_HINT_MS = 1250  # a retry hint for a crowd of a second's worth or less: 250 ms and a second's jitter


async def tokenless_upgrade(port: int) -> int:
    """One upgrade request without a token, on a connection of its own: the answer's status."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        status_line = await asyncio.wait_for(reader.readline(), 30)
        return int(status_line.split()[1])
    finally:
        writer.close()


async def test_a_tokenless_flood_spends_no_admission_and_signed_handshakes_get_in_with_sane_hints(
    stack: Stack, team: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_ADMISSION_RATE": "200",
    }
    node = spawn("node-flooded", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("flooded"), port)
    try:
        await asyncio.to_thread(wait_http, node)
        loop = asyncio.get_running_loop()
        flood_ends = loop.time() + FLOOD_SECONDS
        statuses: list[int] = []

        async def flooder() -> None:
            while loop.time() < flood_ends and len(statuses) < FLOOD_MOST:
                statuses.append(await tokenless_upgrade(port))

        hints: list[int] = []

        async def signed_in() -> None:
            """A member's handshake, honouring the hints it is given."""
            while True:
                try:
                    async with websockets.connect(
                        node.ws, additional_headers={"Authorization": f"Bearer {team.token}"}
                    ):
                        return
                except InvalidStatus as exc:
                    assert exc.response.status_code == 503, exc.response.body
                    hints.append(json.loads(exc.response.body)["retry_after_ms"])
                    await asyncio.sleep(hints[-1] / 1000)

        async def members() -> None:
            await asyncio.sleep(0.5)  # the flood is under way
            for _ in range(20):  # four a second, within one user's share
                await asyncio.wait_for(signed_in(), 60)
                await asyncio.sleep(0.25)

        await asyncio.gather(members(), *(flooder() for _ in range(32)))
        assert len(statuses) > 500, len(statuses)  # a flood, even on a busy machine
        assert max(hints, default=0) <= SANE_HINT_MS, sorted(hints)[-10:]
        assert set(statuses) == {401}, {s: statuses.count(s) for s in set(statuses)}
    finally:
        node.stop()
