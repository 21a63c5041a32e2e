"""GATEWAY_HEALTH_PORT: a second port serving the same node, for health checks and scrapes, with an accept queue
of its own (a reconnect storm overflows the first; `python -m bench storm` measures /healthz through it)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import websockets

from gateway.embedded import free_port
from harness.world import Process, spawn, wait_http
from tests.conftest import Stack
from tests.integration.conftest import Team


def node_env(stack: Stack, health_port: int) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_HEALTH_PORT": str(health_port),
        "GATEWAY_DRAIN_SECONDS": "0",
    }


@pytest.mark.parametrize("workers", [1, 2])
async def test_the_health_port_serves_the_same_node(stack: Stack, team: Team, tmp_path: Path, workers: int) -> None:
    port, health = free_port(), free_port()
    args = ["serve", "--port", str(port)] + (["--workers", str(workers)] if workers > 1 else [])
    node: Process = spawn(f"node-health-{workers}", args, node_env(stack, health), tmp_path, port)
    try:
        await asyncio.to_thread(wait_http, node)
        headers = {"Authorization": f"Bearer {team.token}"}
        async with websockets.connect(node.ws, additional_headers=headers) as ws:  # clients on the first port
            await ws.send(json.dumps({"type": "ping", "id": 1}))
            assert json.loads(await asyncio.wait_for(ws.recv(), 30))["type"] == "pong"
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{health}") as client:
                deadline = asyncio.get_running_loop().time() + 60
                while (ready := await client.get("/readyz")).status_code != 200:  # the relay's first heartbeat
                    assert asyncio.get_running_loop().time() < deadline, ready.text
                    await asyncio.sleep(0.2)
                healthz = await client.get("/healthz")
                assert healthz.status_code == 200
                # The same node (or one of its workers): it counts the websocket opened on the other port.
                if workers == 1:
                    assert healthz.json()["connections"] == 1
                metrics = await client.get("/metrics")
                assert metrics.status_code == 200 and "gateway_event_loop_lag_seconds_bucket" in metrics.text
    finally:
        node.stop()
    assert "Traceback" not in node.output(), node.tracebacks()


HEALTH_CAP = 8  # GATEWAY_HEALTH_MAX_CONNECTIONS in these tests
PENDING_CAP = 20  # the main port's GATEWAY_MAX_PENDING_HANDSHAKES
METRICS_TOKEN = "scraper-token"


@pytest.fixture
async def capped_node(stack: Stack, tmp_path: Path) -> AsyncIterator[tuple[Process, int]]:
    port, health = free_port(), free_port()
    env = {
        **node_env(stack, health),
        "GATEWAY_MAX_PENDING_HANDSHAKES": str(PENDING_CAP),
        "GATEWAY_HEALTH_MAX_CONNECTIONS": str(HEALTH_CAP),
        "GATEWAY_HEALTH_HOST": "127.0.0.2",  # an address of its own (all of 127/8 is loopback on Linux)
        "GATEWAY_HOSTS": "localhost,127.0.0.1,127.0.0.2",
        "GATEWAY_METRICS_TOKEN": METRICS_TOKEN,
    }
    node = spawn("node-health-capped", ["serve", "--port", str(port)], env, tmp_path, port)
    try:
        await asyncio.to_thread(wait_http, node)
        yield node, health
    finally:
        node.stop()
    assert "Traceback" not in node.output(), node.tracebacks()


async def closed_by_server(reader: asyncio.StreamReader) -> bool:
    """Whether the server ends this idle connection (an answer then end of stream, or a reset) within 30 s."""
    try:
        await asyncio.wait_for(reader.read(), 30)
    except TimeoutError:
        return False
    except ConnectionError:
        pass
    return True


async def test_idle_sockets_on_the_health_port_do_not_starve_the_main_port_and_past_its_cap_are_closed(
    capped_node: tuple[Process, int], team: Team
) -> None:
    node, health = capped_node
    # More idle sockets on the health port than the main port lets wait for their headers.
    idle = [await asyncio.open_connection("127.0.0.2", health) for _ in range(PENDING_CAP + 20)]
    try:
        async with httpx.AsyncClient(base_url=node.http) as client:
            for _ in range(5):
                me = await client.get("/api/me", headers={"Authorization": f"Bearer {team.token}"})
                assert me.status_code == 200, me.text
                assert (await client.get("/healthz")).status_code == 200
        # Past the health port's own cap, the idle sockets are closed at once, not held.
        closed = await asyncio.gather(*(closed_by_server(reader) for reader, _ in idle[HEALTH_CAP:]))
        assert all(closed), f"{closed.count(False)} idle sockets past the cap were held"
    finally:
        for _, writer in idle:
            writer.close()


async def test_the_health_port_answers_health_and_metrics_only_on_its_own_address(
    capped_node: tuple[Process, int], team: Team
) -> None:
    node, health = capped_node
    headers = {"Authorization": f"Bearer {team.token}"}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.2:{health}") as client:
        assert (await client.get("/healthz")).status_code == 200
        scrape = await client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert scrape.status_code == 200
        for path in ("/api/me", "/", "/api/teams/1/submissions.csv", "/openapi.json"):
            answer = await client.get(path, headers=headers)
            assert answer.status_code == 404 and answer.json()["error"] == "not_found", (path, answer.text)
    with pytest.raises(websockets.InvalidStatus) as refused:  # no websocket there either
        async with websockets.connect(f"ws://127.0.0.2:{health}/ws", additional_headers=headers):
            pass
    assert refused.value.response.status_code == 404
    with pytest.raises(httpx.ConnectError):  # bound to GATEWAY_HEALTH_HOST only
        async with httpx.AsyncClient() as client:
            await client.get(f"http://127.0.0.1:{health}/healthz")
