"""Attacks by a token holder, replayed against real nodes: malformed channel names, replies nobody reads, and one
team's burst of actions while another team works."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
import websockets

from gateway.embedded import free_port
from gateway.sim.cluster import SimCluster
from harness.follower import Follower
from tests.conftest import Process, Stack, spawn, wait_http
from tests.integration.conftest import Team, make_team
from tests.integration.test_actions import work

MALFORMED = [
    "team:01",
    "team:١",
    "team:²",
    "team:0",
    "team:-1",
    "team:+1",
    "team: 1",
    "team:1 ",
    "team:1\n",
    "team:1.0",
    "team:9223372036854775808",
    "team:99999999999999999999",
    "trajectory:",
    "team-jobs:0x1",
    "Team:1",
    "team",
]


async def read_until(ws: websockets.ClientConnection, done: object, timeout: float = 15.0) -> list[dict]:
    """Messages until one matches `done` (a predicate)."""
    seen: list[dict] = []
    async with asyncio.timeout(timeout):
        while True:
            seen.append(json.loads(await ws.recv()))
            if done(seen[-1]):  # type: ignore[operator]
                return seen


async def test_malformed_channel_names_are_refused_and_the_socket_keeps_serving(stack: Stack, team: Team) -> None:
    headers = {"Authorization": f"Bearer {team.token}"}
    async with websockets.connect(stack.nodes[0].ws, additional_headers=headers) as ws:
        for name in MALFORMED:
            await ws.send(json.dumps({"type": "subscribe", "channel": name}))
            await ws.send(json.dumps({"type": "unsubscribe", "channel": name}))
        # A cursor that only looks like digits is not one of ours: the subscriber gets the snapshot instead.
        await ws.send(json.dumps({"type": "subscribe", "channel": f"team:{team.id}", "cursor": "²-1"}))
        seen = await read_until(ws, lambda m: m["type"] == "snapshot" and m["final"])
        refused = [m for m in seen if m["type"] == "error"]
        assert [m["code"] for m in refused] == ["bad_channel"] * (2 * len(MALFORMED))
        assert [m["channel"] for m in refused] == [n for n in MALFORMED for _ in (0, 1)]
        assert seen[-1]["channel"] == f"team:{team.id}"
        # And the socket still answers everything after that.
        await ws.send(json.dumps({"type": "subscribe", "channel": f"trajectory:{team.trajectory_id}"}))
        seen = await read_until(ws, lambda m: m["type"] == "snapshot" and m["final"])
        assert seen[-1]["channel"] == f"trajectory:{team.trajectory_id}"
    assert "Traceback" not in stack.nodes[0].output(), stack.nodes[0].tracebacks()


def rss_kib(process: Process) -> int:
    with open(f"/proc/{process.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def upgrade_request(port: int, token: str) -> bytes:
    return (
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
    ).encode()


def masked_text(payload: bytes) -> bytes:
    """A client's text frame (masked with a zero key: the bytes stay readable)."""
    assert len(payload) < 1 << 16
    head = (
        bytes((0x81, 0x80 | 126)) + struct.pack("!H", len(payload))
        if len(payload) >= 126
        else bytes((0x81, 0x80 | len(payload)))
    )
    return head + b"\0\0\0\0" + payload


@pytest.fixture
async def eager_node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Process]:
    """A node whose message rate limit and frame budget let a client ask as fast as it likes; a small output bound."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_MAX_MESSAGES_PER_SECOND": "1000000",
        "GATEWAY_MAX_FRAMES_PER_SECOND": "1000000",
        "GATEWAY_MAX_BYTES_PER_SECOND": str(1 << 30),
        "GATEWAY_MAX_PENDING_BYTES": str(256 << 10),
    }
    node = spawn("node-eager", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("eager"), port)
    try:
        await asyncio.to_thread(wait_http, node)
        yield node
    finally:
        node.stop()


async def test_pings_whose_pongs_are_never_read_stay_within_the_bound_and_end_the_connection(
    eager_node: Process, team: Team
) -> None:
    """The attack: an application ping with a long id, over and over, from a client that never reads. Each pong
    was queued outside the connection's bound (the node grew 69 -> 145 MiB in 30 s and never closed it)."""
    ping = masked_text(json.dumps({"type": "ping", "id": "x" * 128}).encode())
    grown = await growth_while_never_reading(eager_node, team, ping * 100, 400)  # 7 MB of pongs
    assert grown < 8 * 1024, f"the node grew {grown} KiB for one client that never reads"


async def growth_while_never_reading(node: Process, team: Team, chunk: bytes, chunks: int) -> int:
    """Send `chunk` `chunks` times on a websocket whose client never reads (a tiny receive buffer: the kernel
    holds little for it either), until the node closes it as a slow consumer; how much the node grew, in KiB."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", node.port))
    await loop.sock_sendall(sock, upgrade_request(node.port, team.token))
    assert (await asyncio.wait_for(loop.sock_recv(sock, 1024), 10)).startswith(b"HTTP/1.1 101")
    before = rss_kib(node)
    try:
        async with asyncio.timeout(60):
            for _ in range(chunks):
                await loop.sock_sendall(sock, chunk)
    except (ConnectionError, OSError):
        pass  # the node gave up on us already
    try:
        # Never reading, it is closed once its replies keep finding no room.
        async with asyncio.timeout(60):
            while "replies found no room" not in node.output():
                await asyncio.sleep(0.1)
    finally:
        grown = rss_kib(node) - before
        sock.close()
    return grown


@pytest.fixture
async def silent_team(stack: Stack, pool: asyncpg.Pool) -> AsyncIterator[tuple[Team, SimCluster]]:
    """A team whose cluster listens for commands and never confirms, with failed jobs to retry."""
    team = await make_team(pool, stack.secret)
    cluster = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0)
    cluster.confirm = False
    await cluster.start()
    await work(cluster, team, 3, "failed")
    yield team, cluster
    await cluster.stop()


async def test_one_teams_burst_of_actions_starves_nobody(
    stack: Stack, pool: asyncpg.Pool, team: Team, silent_team: tuple[Team, SimCluster]
) -> None:
    """150 concurrent Retry Failed Jobs by one member of team B, whose cluster never confirms: each waited in a
    pooled Redis connection, the pool ran out (500s) and team A's subscribe was told `unavailable`."""
    b, _ = silent_team
    confirming = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0)
    await confirming.start()
    try:
        failed = await work(confirming, team, 1, "failed")
        limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
        async with httpx.AsyncClient(base_url=stack.nodes[0].http, limits=limits, timeout=30) as client:
            path = f"/api/trajectories/{b.trajectory_id}/retry-failed"
            burst = [
                asyncio.create_task(client.post(path, headers={"Authorization": f"Bearer {b.token}"}))
                for _ in range(150)
            ]
            await asyncio.sleep(0)  # the burst is on its way
            async with Follower(stack.nodes[0].ws, team.token) as a:
                await a.subscribe(f"team:{team.id}")
                await a.wait_for(lambda f: f.channels[f"team:{team.id}"].snapshot_done, timeout=20)
                assert not a.errors, a.errors
            mine = await client.post(
                f"/api/trajectories/{team.trajectory_id}/retry-failed",
                headers={"Authorization": f"Bearer {team.token}"},
            )
            # Team A's action goes through beside the burst: confirmed, or (on a loaded machine, its cluster slower
            # than the action's wait) sent and said to be on its way; either way its cluster applies it below.
            assert mine.status_code == 200
            assert mine.json()["message"] in (
                "Queued 1 failed job(s) for retry",
                "Queueing 1 failed job(s) for retry on gpu-1: not confirmed yet",
            ), mine.json()
            answers = await asyncio.gather(*burst)
        statuses = [r.status_code for r in answers]
        assert set(statuses) <= {200, 429}, statuses
        assert statuses.count(200) >= 1 and statuses.count(429) >= 100
        limited = next(r for r in answers if r.status_code == 429)
        assert (
            limited.json()["error"] in ("too_many_actions", "rate_limited") and int(limited.headers["Retry-After"]) >= 1
        )
        done = [r.json()["message"] for r in answers if r.status_code == 200]
        assert set(done) == {"Queueing 3 failed job(s) for retry on gpu-1: not confirmed yet"}  # and nothing else
        deadline = asyncio.get_running_loop().time() + 60
        while (status := await pool.fetchval("select status from jobs where id = $1", failed[0])) != "retrying":
            assert asyncio.get_running_loop().time() < deadline, f"team A's retried job still {status} after 60 s"
            await asyncio.sleep(0.1)
    finally:
        await confirming.stop()
