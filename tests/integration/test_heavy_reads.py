"""A team's heavy reads cannot take the node: exports whose readers read nothing hold no pooled connection and no
transaction, exports and searches are capped per user and per node, a search past the statement timeout answers
422, and one its client left is cancelled in PostgreSQL. Taken as an attacker would: a member of a team of many
rows, raw sockets with a small receive window that read nothing, searches abandoned after a second."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import secrets
import socket
import termios
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager

import asyncpg
import httpx
import pytest

from gateway.web.people.auth import issue_token
from harness.waiting import eventually
from tests.conftest import Process, Stack, extra_node
from tests.integration.conftest import Team, make_team

N = 100_000  # some 36 MB of CSV: far more than the kernel's buffers hold for a reader that reads nothing
BROAD = "bulk"  # every row's word: the count reads 100,001 rows (a search is never slower than its count and page)
STALLED = 10


@pytest.fixture(scope="module")
async def crowded(pool: asyncpg.Pool, stack: Stack) -> Team:
    """A team of N submissions whose titles are long runs of one character, as a cluster may create them, and
    their rows saved as the relay saves them.

    The relay derives the first submission's row; the other N - 1 are written beside it in one statement each,
    each saved row the relay's with its own id, title, project and priority: the tests read saved rows, and the
    relay deriving, saving and publishing 100,000 rows one cycle at a time proved nothing they ask."""
    team = await make_team(pool, stack.secret)
    first = await pool.fetchval(
        "insert into submissions (team_id, user_id, project, title, priority)"
        " values ($1, $2, 'p0', repeat('x', 280) || ' y bulk 0', 0) returning id",
        team.id,
        team.user_id,
    )
    await eventually_async(
        lambda: pool.fetchval("select count(*) from submission_rows where id = $1 and time_n is not null", first),
        1,
        "the relay to save the first submission's row",
        timeout=60,
    )
    async with pool.acquire() as db, db.transaction():
        # The others leave no change in the outbox (the trigger is off inside this transaction only: no other
        # session sees it off), so the relay has nothing of theirs to derive.
        await db.execute("alter table submissions disable trigger submissions_capture_insert")
        await db.execute(
            "insert into submissions (team_id, user_id, project, title, priority, created_at)"
            " select $1, $2, 'p' || (i % 4), repeat('x', 280) || ' y bulk ' || i, i % 50, t.created_at"
            " from generate_series(1, $3 - 1) i, submissions t where t.id = $4",
            team.id,
            team.user_id,
            N,
            first,
        )
        await db.execute("alter table submissions enable trigger submissions_capture_insert")
        # Each index of the saved rows is built once over all rows, as CREATE INDEX sorts them (seconds), rather
        # than grown a row at a time (a minute of a busy machine): the same definitions, read back from the catalog.
        indexes = await db.fetch(
            "select i.indexrelid::regclass::text as name, pg_get_indexdef(i.indexrelid) as definition"
            " from pg_index i where i.indrelid = 'submission_rows'::regclass and not i.indisprimary"
        )
        for index in indexes:
            await db.execute(f"drop index {index['name']}")
        await db.execute("set local maintenance_work_mem = '256MB'")
        # The first row is read once, before the insert: joined as a table, a plan that scanned it for each of
        # the 100,000 submissions read every page the insert had added so far, and ran for over half an hour
        # (the whole suite on a busy machine, 2026-12-07).
        await db.execute(
            "with r as materialized (select * from submission_rows where id = $2)"
            " insert into submission_rows (id, team_id, user_id, user_name, status, project, title, priority, cores,"
            " memory_gb, preemptible, progress, tasks, avg_frame, created_at, row, time_sum, time_n, last_change)"
            " select s.id, r.team_id, r.user_id, r.user_name, r.status, s.project, s.title, s.priority, r.cores,"
            " r.memory_gb, r.preemptible, r.progress, r.tasks, r.avg_frame, r.created_at,"
            " (r.row::jsonb || jsonb_build_object('id', s.id, 'project', s.project, 'title', s.title,"
            " 'priority', s.priority))::text, r.time_sum, r.time_n, r.last_change"
            " from submissions s, r where s.team_id = $1 and s.id <> $2",
            team.id,
            first,
        )
        for index in indexes:
            await db.execute(index["definition"])
    assert await pool.fetchval("select count(*) from submission_rows where team_id = $1", team.id) == N
    # What autovacuum does within a minute of a team growing by 100,000 rows: until then PostgreSQL believes the
    # team has none and may read a search through the (team_id, id) index, every row of the team, instead of the
    # index of words, and the narrow search below would be cut off at 0.2 s on any machine.
    await pool.execute("analyze submission_rows")
    return team


async def another_member(pool: asyncpg.Pool, stack: Stack, team: Team) -> str:
    """A token of a new member of `team`."""
    user_id = await pool.fetchval("insert into users (name) values ($1) returning id", f"user {secrets.token_hex(3)}")
    await pool.execute("insert into memberships values ($1, $2)", team.id, user_id)
    return issue_token(stack.secret, user_id, 3600)


def request_bytes(node: Process, path: str, token: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{node.port}\r\nAuthorization: Bearer {token}\r\n\r\n".encode()


@contextmanager
def stalled_readers() -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    try:
        yield opened
    finally:
        for s in opened:
            s.close()


async def stall(node: Process, path: str, token: str, opened: list[socket.socket]) -> str:
    """A request from a socket with a 4 KB receive window that reads its status line and nothing more; the
    status line, once the answer began (the answer's first bytes fill the window)."""
    s = socket.socket()
    opened.append(s)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(s, ("127.0.0.1", node.port))
    await loop.sock_sendall(s, request_bytes(node, path, token))
    first = await asyncio.wait_for(loop.sock_recv(s, 64), 30)
    return first.split(b"\r\n", 1)[0].decode()


def waiting_bytes(s: socket.socket) -> int:
    """Bytes the kernel holds for this socket, unread."""
    held = bytearray(4)
    fcntl.ioctl(s.fileno(), termios.FIONREAD, held)
    return int.from_bytes(held, "little")


async def idle_in_transaction(pool: asyncpg.Pool) -> int:
    """Sessions of this database left idle inside a transaction for more than a second."""
    count: int = await pool.fetchval(
        "select count(*) from pg_stat_activity where datname = current_database()"
        " and state like 'idle in transaction%' and state_change < now() - interval '1 second'"
    )
    return count


async def broad_searches(pool: asyncpg.Pool) -> int:
    count: int = await pool.fetchval(
        "select count(*) from pg_stat_activity where datname = current_database() and state = 'active'"
        " and query like '%submission_rows%words @@%' and pid <> pg_backend_pid()"
    )
    return count


@contextlib.asynccontextmanager
async def rows_held(pool: asyncpg.Pool) -> AsyncIterator[None]:
    """submission_rows locked against every read meanwhile: a search then runs (waits, active in PostgreSQL) until
    its statement timeout, its client's leaving or the lock's end, however quick it is on this machine. No search
    of the index of words takes seconds here (its count reads at most 100,001 rows), and these tests are about
    what a slow one does."""
    async with pool.acquire() as db, db.transaction():
        await db.execute("lock table submission_rows in access exclusive mode")
        yield


@pytest.fixture
async def other(pool: asyncpg.Pool, stack: Stack) -> AsyncIterator[Team]:
    yield await make_team(pool, stack.secret)


async def test_stalled_exports_hold_no_connection_and_are_capped(
    stack: Stack,
    pool: asyncpg.Pool,
    crowded: Team,
    other: Team,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    path = f"/api/teams/{crowded.id}/submissions.csv"
    tokens = [crowded.token] + [await another_member(pool, stack, crowded) for _ in range(STALLED // 2)]
    settings = {"GATEWAY_MAX_EXPORTS_PER_USER": "2", "GATEWAY_MAX_EXPORTS": str(STALLED)}
    with extra_node(stack, "node-exports", tmp_path_factory, **settings) as node, stalled_readers() as opened:
        # Five members, two exports each: ten readers that read nothing, as many as the node's pool has
        # connections.
        for token in tokens[:-1]:
            for _ in range(2):
                assert await stall(node, path, token, opened) == "HTTP/1.1 200 OK"
        await eventually(lambda: all(waiting_bytes(s) > 1024 for s in opened), "each export to fill its window")

        # Another team's calls and its cluster's ingest are answered meanwhile, and no session waits in a
        # transaction for the readers.
        async with httpx.AsyncClient(base_url=node.http, timeout=15) as client:
            bearer = {"Authorization": f"Bearer {other.token}"}
            assert (await client.get(f"/api/teams/{other.id}/members", headers=bearer)).status_code == 200
            assert (await client.get(f"/api/teams/{other.id}/submissions", headers=bearer)).status_code == 200
            job = {"status": "queued", "trajectory_id": other.trajectory_id, "kind": "rasterize", "name": "Preview"}
            ingest = await client.post(
                "/api/ingest/jobs", json={"jobs": [job]}, headers={"Authorization": f"Bearer {other.cluster_key}"}
            )
            assert ingest.status_code == 200, ingest.text
            assert (await client.get("/readyz")).status_code == 200
        assert await idle_in_transaction(pool) == 0

        # A third export of one member, and an eleventh of the node: 429, saying which bound.
        async with httpx.AsyncClient(base_url=node.http, timeout=15) as client:
            third = await client.get(path, headers={"Authorization": f"Bearer {tokens[0]}"})
            assert third.status_code == 429 and "of your exports" in third.json()["message"], third.text
            eleventh = await client.get(path, headers={"Authorization": f"Bearer {tokens[-1]}"})
            assert eleventh.status_code == 429 and "this node streams" in eleventh.json()["message"], eleventh.text


async def test_an_export_whose_reader_stalls_is_cut_and_its_slot_freed(
    stack: Stack, crowded: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = f"/api/teams/{crowded.id}/submissions.csv"
    settings = {"GATEWAY_MAX_EXPORTS_PER_USER": "1", "GATEWAY_SEND_STALL_SECONDS": "1"}
    with extra_node(stack, "node-stall", tmp_path_factory, **settings) as node, stalled_readers() as opened:
        assert await stall(node, path, crowded.token, opened) == "HTTP/1.1 200 OK"
        # The member's one export is taken while it streams; once cut, the next is let in.
        async with httpx.AsyncClient(base_url=node.http, timeout=15) as client:
            bearer = {"Authorization": f"Bearer {crowded.token}"}
            assert (await client.get(path, headers=bearer)).status_code == 429
            deadline = time.monotonic() + 60
            while (status := await stall(node, path, crowded.token, opened)) != "HTTP/1.1 200 OK":
                assert status.startswith("HTTP/1.1 429"), status
                assert time.monotonic() < deadline, "the stalled export was not cut within 60 s"
                await asyncio.sleep(0.1)
        # The cut reader's connection is reset, or ends without the chunked answer's end: it can tell it was cut.
        cut = opened[0]
        cut.setblocking(True)
        cut.settimeout(30)
        received = bytearray()
        with contextlib.suppress(ConnectionResetError):
            while chunk := cut.recv(1 << 16):
                received += chunk
        assert not received.endswith(b"\r\n0\r\n\r\n") and len(received) < N * 300


async def test_a_search_past_the_statement_timeout_answers_422(
    stack: Stack, pool: asyncpg.Pool, crowded: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with extra_node(stack, "node-timeout", tmp_path_factory, GATEWAY_STATEMENT_TIMEOUT="0.2") as node:
        async with httpx.AsyncClient(base_url=node.http, timeout=60) as client:
            bearer = {"Authorization": f"Bearer {crowded.token}"}
            async with rows_held(pool):
                for path in ("submissions", "submissions.csv"):
                    response = await client.get(f"/api/teams/{crowded.id}/{path}", params={"q": BROAD}, headers=bearer)
                    assert response.status_code == 422, (path, response.status_code, response.text[:200])
                    assert response.json()["error"] == "too_broad" and "narrow it" in response.json()["message"]
            # The node serves on, and a narrow search still answers (within 0.2 s through the index of words once
            # PostgreSQL has its pages at hand: a first try on a busy machine may be cut off, and is said so).
            for _ in range(5):
                narrow = await client.get(
                    f"/api/teams/{crowded.id}/submissions", params={"q": "bulk 777"}, headers=bearer
                )
                if narrow.status_code != 422:
                    break
            assert narrow.status_code == 200 and narrow.json()["total"] >= 1, narrow.text[:200]


@pytest.fixture(scope="module")
def patient_node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """A node whose statement timeout is far longer than any wait here (only a client's leaving can end its
    searches in time) and that runs two broad searches at once: the abandoned search's test sends one, the cap's
    three. Each test waits until no broad search runs before it ends."""
    settings = {"GATEWAY_STATEMENT_TIMEOUT": "600", "GATEWAY_MAX_HEAVY_READS": "2"}
    with extra_node(stack, "node-patient", tmp_path_factory, **settings) as node:
        yield node


async def test_an_abandoned_search_is_cancelled_in_postgresql(
    pool: asyncpg.Pool, crowded: Team, patient_node: Process
) -> None:
    node = patient_node
    query = httpx.QueryParams({"q": BROAD})
    async with rows_held(pool):
        with socket.create_connection(("127.0.0.1", node.port)) as s:
            s.sendall(request_bytes(node, f"/api/teams/{crowded.id}/submissions?{query}", crowded.token))
            deadline = time.monotonic() + 30
            while not await broad_searches(pool):
                assert time.monotonic() < deadline, "the search never ran"
                await asyncio.sleep(0.05)
        deadline = time.monotonic() + 10
        while await broad_searches(pool):
            assert time.monotonic() < deadline, "the abandoned search still runs 10 s after its client left"
            await asyncio.sleep(0.05)


async def test_broad_searches_are_capped_per_node_whoever_asks(
    stack: Stack, pool: asyncpg.Pool, crowded: Team, other: Team, patient_node: Process
) -> None:
    members = [await another_member(pool, stack, crowded) for _ in range(3)]
    node = patient_node
    query = httpx.QueryParams({"q": BROAD})
    path = f"/api/teams/{crowded.id}/submissions?{query}"
    async with httpx.AsyncClient(base_url=node.http, timeout=60) as client:
        async with rows_held(pool):
            with (
                socket.create_connection(("127.0.0.1", node.port)) as first,
                socket.create_connection(("127.0.0.1", node.port)) as second,
            ):
                first.sendall(request_bytes(node, path, members[0]))
                second.sendall(request_bytes(node, path, members[1]))
                await eventually_async(lambda: broad_searches(pool), 2, "two broad searches to run")
                third = await client.get(path, headers={"Authorization": f"Bearer {members[2]}"})
                assert third.status_code == 429 and "this node runs 2 searches" in third.json()["message"], third.text
            await eventually_async(lambda: broad_searches(pool), 0, "the abandoned searches to be cancelled")
        bearer = {"Authorization": f"Bearer {other.token}"}  # another team's window is no heavy read
        assert (await client.get(f"/api/teams/{other.id}/submissions", headers=bearer)).status_code == 200


async def eventually_async(count: Callable[[], Awaitable[int]], expected: int, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while await count() != expected:
        assert time.monotonic() < deadline, f"still waiting for {what} after {timeout:g} s"
        await asyncio.sleep(0.05)
