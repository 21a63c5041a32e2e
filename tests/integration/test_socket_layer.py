"""A client that leaves is a client gone, at any point of its request, on a real node (gateway.web.server): the
node closes the connection, counts it (`gateway_http_clients_gone_total`) and logs no traceback. Each way of
leaving is replayed on raw sockets, the abrupt ones with a reset (SO_LINGER 0), as a browser leaving a page does.

A full-suite run once logged "Exception in ASGI application" from the socket layer when a page went away mid
answer: a send waiting for room in the socket woke to a closed socket and wrote to it (uvloop raises there).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Iterator

import asyncpg
import httpx
import pytest

from tests.conftest import Process, Stack, extra_node
from tests.integration.conftest import Team, make_team

N = 20_000  # submissions of some 300 bytes each: an export far larger than the kernel holds for a stalled reader
WINDOW = 4096  # the stalled readers' receive buffer


@pytest.fixture(scope="module")
def node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """A node of this module's own, so its log holds only what these clients did; a reader that takes nothing is
    cut after a second."""
    with extra_node(stack, "node-gone", tmp_path_factory, GATEWAY_SEND_STALL_SECONDS="1") as started:
        yield started


@pytest.fixture(scope="module")
async def crowded(pool: asyncpg.Pool, stack: Stack) -> Team:
    """A team of N submissions, the relay's rows of them saved (what the Submissions page and its CSV read)."""
    team = await make_team(pool, stack.secret)
    await pool.execute(
        "insert into submissions (team_id, user_id, project, title, priority)"
        " select $1, $2, 'p' || (i % 4), repeat('x', 280) || ' gone ' || i, i % 50 from generate_series(1, $3) i",
        team.id,
        team.user_id,
        N,
    )
    deadline = time.monotonic() + 300
    while await pool.fetchval("select count(*) from submission_rows where team_id = $1", team.id) < N:
        assert time.monotonic() < deadline, f"the relay did not save {N} rows within 300 s"
        await asyncio.sleep(0.2)
    return team


def head(node: Process, method: str, path: str, bearer: str = "", extra: str = "") -> bytes:
    auth = f"Authorization: Bearer {bearer}\r\n" if bearer else ""
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{node.port}\r\n{auth}{extra}\r\n".encode()


async def connect(node: Process, window: int = 0) -> socket.socket:
    s = socket.socket()
    if window:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, window)
    s.setblocking(False)
    await asyncio.get_running_loop().sock_connect(s, ("127.0.0.1", node.port))
    return s


def reset(s: socket.socket) -> None:
    """Leave as a closed tab does: at once, with a reset, whatever the node was sending."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


async def gone_count(node: Process) -> int:
    async with httpx.AsyncClient(timeout=30) as client:
        text = (await client.get(f"{node.http}/metrics")).text
    line = next(line for line in text.splitlines() if line.startswith("gateway_http_clients_gone_total "))
    return int(float(line.split()[1]))


async def counted(node: Process, before: int, at_least: int) -> None:
    """The node counted `at_least` more clients gone (it has noticed each of them)."""
    deadline = time.monotonic() + 60
    while (now := await gone_count(node)) < before + at_least:
        assert time.monotonic() < deadline, f"{now - before} clients counted gone, {at_least} expected"
        await asyncio.sleep(0.1)


def no_traceback(node: Process) -> None:
    output = node.output()
    assert "Traceback" not in output and "Exception in ASGI application" not in output, node.tracebacks()


async def test_a_client_gone_mid_request_body_is_counted_without_a_traceback(node: Process, team: Team) -> None:
    """Each handler reading a body (under its bound, so none is refused for its size) reads a disconnect instead
    of the rest."""
    before = await gone_count(node)
    origin = f"Origin: http://127.0.0.1:{node.port}\r\n"
    posts = [
        ("/api/ingest/jobs", team.cluster_key, "application/json", ""),
        ("/sign-in", "", "application/x-www-form-urlencoded", origin),  # the sign-in link's confirmation form
        (f"/api/teams/{team.id}/views", team.token, "application/json", origin),
    ]
    for path, bearer, kind, more in posts:
        s = await connect(node)
        extra = f"Content-Type: {kind}\r\nTransfer-Encoding: chunked\r\n{more}"
        part = b"3000\r\n" + b"{" * 8000  # a chunk of 12,288 bytes that stops two thirds of the way
        await asyncio.get_running_loop().sock_sendall(s, head(node, "POST", path, bearer, extra) + part)
        s.close()
    await counted(node, before, len(posts))
    no_traceback(node)


async def test_a_client_gone_before_its_answer_began_is_counted_without_a_traceback(
    node: Process, crowded: Team
) -> None:
    """Requests whose work takes a while (a window of N rows, its count, its search), left before any answer."""
    before = await gone_count(node)
    paths = [
        f"/api/teams/{crowded.id}/submissions?limit=500&sort=title",
        f"/api/teams/{crowded.id}/submissions?q=gone%2019999",
        f"/api/teams/{crowded.id}/submissions.csv?q=gone",
        f"/api/teams/{crowded.id}/trajectories",
        f"/api/teams/{crowded.id}/activity.csv",
        "/api/me",
    ]
    for path in paths:
        s = await connect(node)
        await asyncio.get_running_loop().sock_sendall(s, head(node, "GET", path, crowded.token))
        s.close()  # before anything was answered: an end of stream, after the request
    await counted(node, before, 1)  # at least the slowest was still being worked on
    no_traceback(node)
    async with httpx.AsyncClient(base_url=node.http, timeout=30) as client:  # and the node serves on
        bearer = {"Authorization": f"Bearer {crowded.token}"}
        answer = await client.get(f"/api/teams/{crowded.id}/submissions?limit=1", headers=bearer)
        assert answer.status_code == 200 and answer.json()["total"] == N


async def stalled(node: Process, path: str, token: str) -> socket.socket:
    """A reader with a small window that reads the status line of its export, then nothing (asked again while
    the export before it still holds the member's slot)."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + 60
    while True:
        s = await connect(node, WINDOW)
        await loop.sock_sendall(s, head(node, "GET", path, token))
        first = await asyncio.wait_for(loop.sock_recv(s, 64), 30)
        if first.startswith(b"HTTP/1.1 200 "):
            return s
        s.close()
        assert first.startswith(b"HTTP/1.1 429 ") and time.monotonic() < deadline, first
        await asyncio.sleep(0.1)


async def test_a_reader_gone_mid_export_is_counted_without_a_traceback(node: Process, crowded: Team) -> None:
    """The CSV export streams far more than the kernel holds: its send waits for room in the socket when the
    reader leaves (the node's own cut of a reader that takes nothing, and a reader's reset)."""
    path = f"/api/teams/{crowded.id}/submissions.csv"
    before = await gone_count(node)
    cut = await stalled(node, path, crowded.token)
    await counted(node, before, 1)  # cut at the send stall (a second): its export waited for room until then
    cut.close()
    for _ in range(3):
        s = await stalled(node, path, crowded.token)
        await asyncio.sleep(0.2)  # part of the way there, not an assertion: the export fills what it can
        reset(s)
    await counted(node, before, 4)
    no_traceback(node)
    async with httpx.AsyncClient(base_url=node.http, timeout=120) as client:  # a reader who stays gets it all
        whole = await client.get(path, headers={"Authorization": f"Bearer {crowded.token}"})
        assert whole.status_code == 200 and whole.text.count("\n") == N + 1


async def test_a_client_gone_mid_static_file_or_page_logs_no_traceback(node: Process) -> None:
    loop = asyncio.get_running_loop()
    for path in ("/", "/style.css", "/js/app.js", "/openapi.json", "/submissions/lifecycle.svg"):
        s = await connect(node, WINDOW)
        await loop.sock_sendall(s, head(node, "GET", path))
        await asyncio.wait_for(loop.sock_recv(s, 64), 30)
        reset(s)
    async with httpx.AsyncClient(base_url=node.http, timeout=30) as client:
        assert (await client.get("/style.css")).status_code == 200
    no_traceback(node)


async def test_pipelined_requests_left_unanswered_are_counted_without_a_traceback(node: Process, crowded: Team) -> None:
    before = await gone_count(node)
    s = await connect(node)
    slow = head(node, "GET", f"/api/teams/{crowded.id}/submissions.csv", crowded.token)
    await asyncio.get_running_loop().sock_sendall(s, slow + head(node, "GET", "/api/me", crowded.token) * 2)
    s.close()  # what the export sent so far is unread: a reset
    await counted(node, before, 3)  # the export being answered, and the two behind it
    no_traceback(node)
