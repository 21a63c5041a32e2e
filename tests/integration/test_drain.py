"""How a node leaves on SIGTERM (gateway.web.node.leaving): /readyz turns 503 at once while it serves on for
GATEWAY_DRAIN_SECONDS, so a load balancer takes it out first; then every websocket closes with 1012 and a retry
hint of its own in the reason, and the process exits 0."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
import pytest
import websockets

from gateway.core.restart import RESTART_CODE, retry_after_ms
from tests.conftest import Process, Stack, extra_node
from tests.integration.conftest import Team

CLIENTS = 30
DRAIN = 3.0


async def connect(node: Process, team: Team, channel: str) -> websockets.ClientConnection:
    ws = await websockets.connect(node.ws, additional_headers={"Authorization": f"Bearer {team.token}"})
    await ws.send(f'{{"type": "subscribe", "channel": "{channel}"}}')
    return ws


async def closed(ws: websockets.ClientConnection) -> tuple[float, int | None, str]:
    """When the node closed `ws` (time.monotonic()), with what code and reason."""
    with pytest.raises(websockets.ConnectionClosed):
        while True:
            await ws.recv()
    return time.monotonic(), ws.close_code, ws.close_reason or ""


async def readyz(client: httpx.AsyncClient) -> httpx.Response:
    return await client.get("/readyz", timeout=10)


async def exit_code(node: Process, timeout: float = 60) -> int:
    return await asyncio.to_thread(node.proc.wait, timeout)


async def test_sigterm_turns_readyz_503_first_then_closes_every_websocket_with_its_own_retry_hint_and_exits_0(
    stack: Stack, team: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = {"GATEWAY_DRAIN_SECONDS": str(DRAIN), "GATEWAY_MAX_CONNECTIONS_PER_USER": "100"}
    with extra_node(stack, "node-drained", tmp_path_factory, **settings) as node:
        channel = f"trajectory:{team.trajectory_id}"
        clients = [await connect(node, team, channel) for _ in range(CLIENTS)]
        async with httpx.AsyncClient(base_url=node.http) as http:
            deadline = time.monotonic() + 60
            while (await readyz(http)).status_code != 200:  # the relay's heartbeat is in Redis
                assert time.monotonic() < deadline, (await readyz(http)).text
                await asyncio.sleep(0.1)
            closes = [asyncio.create_task(closed(ws)) for ws in clients]
            node.proc.send_signal(signal.SIGTERM)
            signalled = time.monotonic()
            while (answer := await readyz(http)).status_code == 200:
                assert time.monotonic() < signalled + 10, "/readyz still 200 after SIGTERM"
                await asyncio.sleep(0.02)
            not_ready = time.monotonic()
            assert answer.status_code == 503 and answer.json() == {"ready": False, "problems": ["shutting down"]}
            # Still serving while the load balancer takes it out: nobody was closed yet, /healthz answers, and a
            # client that arrives now (a load balancer that has not noticed yet) is let in, to leave with the rest.
            assert not any(c.done() for c in closes)
            assert (await http.get("/healthz")).json()["ok"] is True
            late = await connect(node, team, channel)
            closes.append(asyncio.create_task(closed(late)))
        results = await asyncio.wait_for(asyncio.gather(*closes), 60)
        assert await exit_code(node) == 0
    assert not_ready - signalled < DRAIN / 2  # at once, not at the end of the drain
    assert all(code == RESTART_CODE for _, code, _ in results), results
    assert all(at - signalled >= DRAIN - 0.1 for at, _, _ in results)  # after the drain, not before
    hints = [retry_after_ms(reason) for _, _, reason in results]
    assert None not in hints and len(set(hints)) == len(hints) == CLIENTS + 1, hints  # each its own
    assert all(reason.startswith("server restarting: connect again") for _, _, reason in results)
    log = node.output()
    assert "/readyz answers 503" in log and f"closing {CLIENTS + 1} websockets with 1012" in log, log[-2000:]


async def test_a_second_sigterm_ends_the_drain_at_once(
    stack: Stack, team: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with extra_node(stack, "node-hurried", tmp_path_factory, GATEWAY_DRAIN_SECONDS="600") as node:
        ws = await connect(node, team, f"trajectory:{team.trajectory_id}")
        closing = asyncio.create_task(closed(ws))
        node.proc.send_signal(signal.SIGTERM)
        async with httpx.AsyncClient(base_url=node.http) as http:
            deadline = time.monotonic() + 10
            while (await readyz(http)).status_code != 503:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
        node.proc.send_signal(signal.SIGTERM)  # the operator will not wait ten minutes
        _, code, reason = await asyncio.wait_for(closing, 30)
        assert code == RESTART_CODE and retry_after_ms(reason) is not None
        assert await exit_code(node) == 0
