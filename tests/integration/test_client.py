"""Feeds for tools: the Python client and `gateway tail`."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import asyncpg
import pytest

from gateway.client import GatewayClient, websocket_url
from gateway.core.protocol import Snapshot
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs


def test_websocket_url_from_a_gateway_url() -> None:
    assert websocket_url("http://127.0.0.1:8000") == "ws://127.0.0.1:8000/ws"
    assert websocket_url("https://jobs.example/") == "wss://jobs.example/ws"
    assert websocket_url("ws://h:1/ws") == "ws://h:1/ws"


@pytest.mark.parametrize("fmt", ["json", "msgpack"])
async def test_client_resumes_after_a_dropped_connection_without_a_snapshot(
    stack: Stack, pool: asyncpg.Pool, team: Team, fmt: str
) -> None:
    ids = await insert_jobs(pool, team, 5)
    channel = f"team-jobs:{team.id}"
    seen: dict[int, tuple[str, int]] = {}
    snapshots = 0
    async with GatewayClient(stack.nodes[0].http, team.token, fmt=fmt) as client:  # type: ignore[arg-type]
        await client.subscribe(channel)
        messages = aiter(client)

        async def until(predicate) -> None:  # type: ignore[no-untyped-def]
            nonlocal snapshots
            while not predicate():
                m = await asyncio.wait_for(anext(messages), 10)
                if isinstance(m, Snapshot):
                    snapshots += 1
                for job in getattr(m, "jobs", None) or ():
                    if job.id not in seen or job.version > seen[job.id][1]:
                        seen[job.id] = (job.status, job.version)

        await until(lambda: set(ids) <= set(seen))
        assert client._ws is not None
        client._ws.transport.abort()  # the network drops
        await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
        await until(lambda: all(seen[i][0] == "completed" for i in ids))
        assert client.reconnects == 1 and snapshots == 1


async def test_client_reads_a_paged_snapshot_of_a_40000_job_trajectory(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame) select $1, $2, $3, 'preprocess',"
        " 'Preprocess trajectory frame', f from generate_series(0, 39999) f",
        team.id, team.trajectory_id, team.cluster_id,
    )
    await asyncio.sleep(1.0)
    jobs: set[int] = set()
    async with GatewayClient(stack.nodes[1].http, team.token) as client:
        await client.subscribe(f"trajectory:{team.trajectory_id}")
        async for m in client:
            if isinstance(m, Snapshot):
                jobs.update(j.id for j in m.jobs or ())
                if m.final:
                    break
    assert len(jobs) == 40_000


async def test_gateway_tail_prints_one_json_line_per_message(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    env = {**os.environ, "GATEWAY_URL": stack.nodes[0].http, "GATEWAY_TOKEN": team.token}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", "tail", "--team", str(team.id), "--format", "msgpack",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 10))  # type: ignore[union-attr]
        assert (first["type"], first["channel"]) == ("snapshot", f"team-jobs:{team.id}")
        (job_id,) = await insert_jobs(pool, team, 1)
        line = json.loads(await asyncio.wait_for(proc.stdout.readline(), 10))  # type: ignore[union-attr]
        assert line["type"] == "batch" and [j["id"] for j in line["jobs"]] == [job_id]
    finally:
        proc.terminate()
        await proc.wait()
