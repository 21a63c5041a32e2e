"""A node whose link to Redis stalls (packets dropped, no FIN or RST: nothing TCP itself notices soon) says so on
/readyz within its keepalive, closes its clients with 1013 rather than leave them on a silent socket, refuses new
ones until the link is back, and then serves them again from their cursors with nothing lost."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest
import websockets

from harness.follower import Follower
from harness.proxy import Proxy
from tests.conftest import Process, Stack, spawn, wait_http
from tests.integration.conftest import Team, insert_jobs

KEEPALIVE = 5.0  # a bus link silent 3 s is dead; lost 2 s more, its clients are closed


@pytest.fixture
async def proxied_node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Process, Proxy]]:
    """A node that reaches Redis through a proxy the test can stall."""
    from gateway.embedded import free_port

    redis = urlsplit(stack.redis_url)
    proxy = Proxy(redis.hostname or "127.0.0.1", redis.port or 6379)
    await proxy.start()
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": f"redis://127.0.0.1:{proxy.port}{redis.path}",
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_KEEPALIVE": str(KEEPALIVE),
    }
    node = spawn("node-proxied-redis", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("bus-loss"), port)
    try:
        await asyncio.to_thread(wait_http, node)
        yield node, proxy
    finally:
        # From a thread: the node's shutdown still talks to Redis through the proxy, which runs on this loop.
        await asyncio.to_thread(node.stop)
        await proxy.close()


async def readiness(node: Process) -> tuple[int, list[str]]:
    async with httpx.AsyncClient(base_url=node.http, timeout=30) as client:
        answer = await client.get("/readyz")
    return answer.status_code, answer.json()["problems"]


async def test_a_stalled_bus_link_is_reported_its_clients_are_told_and_nothing_is_lost(
    proxied_node: tuple[Process, Proxy], pool: asyncpg.Pool, team: Team
) -> None:
    node, proxy = proxied_node
    channel = f"trajectory:{team.trajectory_id}"
    ready: list[tuple[int, list[str]]] = []

    async def ready_now() -> bool:
        ready.append(await readiness(node))
        return ready[-1][0] == 200

    deadline = asyncio.get_running_loop().time() + 60
    while not await ready_now():
        assert asyncio.get_running_loop().time() < deadline, ready[-1]
        await asyncio.sleep(0.2)

    async with Follower(node.ws, team.token) as follower:
        await follower.subscribe(channel)
        await follower.wait_for(lambda f: f.channels[channel].snapshot_done)
        before = await insert_jobs(pool, team, 3)
        await follower.wait_for(lambda f: set(before) <= set(f.listed(channel)))

        proxy.stall()
        stalled_at = asyncio.get_running_loop().time()
        # Told within the keepalive: /readyz first, then the socket closed with 1013.
        while True:
            status, problems = await readiness(node)
            if "redis subscription lost" in problems:
                break
            assert asyncio.get_running_loop().time() - stalled_at < 4 * KEEPALIVE, problems
            await asyncio.sleep(0.2)
        assert status == 503
        await follower.wait_for(lambda f: f.closed is not None, timeout=4 * KEEPALIVE)
        assert follower.closed is not None and follower.closed.rcvd is not None
        assert follower.closed.rcvd.code == 1013
        # Meanwhile the work goes on, and a new socket is sent elsewhere for now.
        during = await insert_jobs(pool, team, 4)
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(node.ws, additional_headers={"Authorization": f"Bearer {team.token}"}):
                pass
        assert refused.value.response.status_code == 503

        proxy.flow()
        deadline = asyncio.get_running_loop().time() + 60
        while not await ready_now():
            assert asyncio.get_running_loop().time() < deadline, ready[-1]
            await asyncio.sleep(0.2)
        # Back: the client resumes from its cursor and has everything, nothing twice, no snapshot again.
        snapshots = follower.channels[channel].snapshots
        await follower.reconnect()
        await follower.wait_for(lambda f: set(before + during) <= set(f.listed(channel)), timeout=30)
        assert follower.channels[channel].snapshots == snapshots and follower.problems == []
    assert "Traceback" not in node.output(), node.tracebacks()
