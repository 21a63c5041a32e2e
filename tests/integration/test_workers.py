"""`gateway serve --workers N`: N nodes share one port (SO_REUSEPORT); connections spread over them, every one
serves every channel, and the whole stops as one node does."""

from __future__ import annotations

import asyncio
import os
import signal

import asyncpg
import httpx
import pytest
import websockets

from gateway.embedded import free_port
from harness.follower import Follower
from harness.processes import alive, descendants
from harness.waiting import eventually
from tests.conftest import Process, Stack, spawn, wait_http
from tests.integration.conftest import Team, insert_jobs

CLIENTS = 16  # under the 20 connections one user may hold on a worker, however unevenly they spread


def workers_node(stack: Stack, name: str, tmp_path_factory: pytest.TempPathFactory, **settings: str) -> Process:
    """`gateway serve --workers 2` on a free port, against the stack's PostgreSQL and Redis."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        **settings,
    }
    return spawn(name, ["serve", "--port", str(port), "--workers", "2"], env, tmp_path_factory.mktemp(name), port)


async def both_workers_answer(node: Process) -> None:
    """Both workers listening: the first to answer may be alone for a while."""
    answered: set[int] = set()
    deadline = asyncio.get_running_loop().time() + 120
    while len(answered) < 2:
        assert asyncio.get_running_loop().time() < deadline, f"only workers {answered} answered"
        async with httpx.AsyncClient(base_url=node.http) as client:
            answered.add((await client.get("/healthz")).json()["worker"])


async def test_one_user_holds_no_more_sockets_than_the_limit_across_the_workers(
    stack: Stack, team: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    limit = 4
    node = workers_node(stack, "node-workers-limit", tmp_path_factory, GATEWAY_MAX_CONNECTIONS_PER_USER=str(limit))
    headers = {"Authorization": f"Bearer {team.token}"}
    held: list[websockets.ClientConnection] = []
    try:
        await asyncio.to_thread(wait_http, node)
        await both_workers_answer(node)
        refused = 0
        for _ in range(3 * limit):  # each on a connection of its own: the kernel spreads them over both workers
            try:
                held.append(await websockets.connect(node.ws, additional_headers=headers))
            except websockets.InvalidStatus as exc:
                assert exc.response.status_code == 429, exc.response.body
                refused += 1
        assert len(held) == limit and refused == 2 * limit
        # A socket closed gives its place back, whichever worker held it.
        await held.pop().close()

        deadline = asyncio.get_running_loop().time() + 30
        while len(held) < limit:
            assert asyncio.get_running_loop().time() < deadline, "the closed socket's place was not given back"
            try:
                held.append(await websockets.connect(node.ws, additional_headers=headers))
            except websockets.InvalidStatus as exc:
                assert exc.response.status_code == 429, exc.response.body
                await asyncio.sleep(0.1)
    finally:
        for ws in held:
            await ws.close()
        node.stop()


async def test_two_workers_share_the_port_and_each_serves_every_channel(
    stack: Stack, pool: asyncpg.Pool, team: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    node = workers_node(stack, "node-workers", tmp_path_factory)
    try:
        await asyncio.to_thread(wait_http, node)
        # Both workers listening before the clients come: the first to answer may be alone for a while.
        answered: set[int] = set()
        deadline = asyncio.get_running_loop().time() + 120
        while len(answered) < 2:
            assert asyncio.get_running_loop().time() < deadline, f"only workers {answered} answered"
            async with httpx.AsyncClient(base_url=node.http) as client:
                answered.add((await client.get("/healthz")).json()["worker"])
        channel = f"trajectory:{team.trajectory_id}"
        followers = [Follower(node.ws, team.token) for _ in range(CLIENTS)]
        for follower in followers:
            await follower.__aenter__()
            await follower.subscribe(channel)
        try:
            for follower in followers:
                await follower.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=30)
            # Which worker answers is the kernel's choice, per connection: ask on fresh connections until both
            # have said how many websockets they hold.
            held: dict[int, int] = {}
            for _ in range(200):
                async with httpx.AsyncClient(base_url=node.http) as client:  # a new connection each time
                    health = (await client.get("/healthz")).json()
                held[health["worker"]] = health["connections"]
                if len(held) == 2 and sum(held.values()) == CLIENTS:
                    break
            assert set(held) == {0, 1}, held
            assert sum(held.values()) == CLIENTS and min(held.values()) > 0, held  # spread over both
            # A change reaches every subscriber, whichever worker holds its socket.
            ids = await insert_jobs(pool, team, 3)
            for follower in followers:
                await follower.wait_for(lambda f: set(ids) <= set(f.listed(channel)), timeout=30)
        finally:
            for follower in followers:
                await follower.__aexit__(None, None, None)
        # SIGTERM stops the workers as one node stops: the parent exits 0, nothing left listening.
        async with websockets.connect(node.ws, additional_headers={"Authorization": f"Bearer {team.token}"}) as ws:
            node.proc.send_signal(signal.SIGTERM)
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
        assert await asyncio.to_thread(node.proc.wait, 60) == 0
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient(base_url=node.http) as client:
                await client.get("/healthz")
        assert "Traceback" not in node.output(), node.tracebacks()
    finally:
        node.stop()


def test_workers_must_be_a_positive_number(tmp_path_factory: pytest.TempPathFactory) -> None:
    import subprocess
    import sys

    for bad in ("0", "two"):
        done = subprocess.run(
            [sys.executable, "-m", "gateway.cli", "serve", "--workers", bad], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2 and "--workers" in done.stderr, done.stderr


@pytest.mark.parametrize("when", ["serving", "starting"])
async def test_workers_stop_when_their_parent_is_killed(
    stack: Stack, tmp_path_factory: pytest.TempPathFactory, when: str
) -> None:
    """SIGKILL gives the parent no chance to stop them: the workers end on their own and free the port, even
    when the parent dies while they are still starting (before they could ask to be told of its death)."""
    node = workers_node(stack, "node-orphans", tmp_path_factory)
    try:
        if when == "serving":
            await asyncio.to_thread(wait_http, node)
        else:
            await eventually(lambda: "worker 1 started" in node.output(), "the parent to start its workers")
        workers = descendants(node.proc.pid)
        assert workers, node.output()
        node.proc.kill()
        await eventually(lambda: not any(alive(pid) for pid in workers), "every worker to end with its parent")
        with pytest.raises(httpx.TransportError):
            async with httpx.AsyncClient(base_url=node.http) as client:
                await client.get("/healthz")
    finally:
        node.stop()
