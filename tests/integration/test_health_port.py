"""GATEWAY_HEALTH_PORT: a second port serving the same node, for health checks and scrapes, with an accept queue
of its own (a reconnect storm overflows the first; `python -m bench storm` measures /healthz through it)."""

from __future__ import annotations

import asyncio
import json
import os
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
    assert "Traceback" not in node.output()
