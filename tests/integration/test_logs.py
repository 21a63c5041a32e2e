"""A node's log in JSON (`GATEWAY_LOG_FORMAT=json`): access lines with their request in fields, tokens redacted,
and one line per websocket's close with its code, duration and bytes."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg
import httpx
import pytest
import websockets

from gateway.embedded import free_port
from gateway.web.people.auth import issue_token
from harness.follower import Follower
from tests.conftest import Process, Stack, spawn, wait_http
from tests.integration.conftest import Team, insert_jobs

Entry = dict[str, Any]


@pytest.fixture(scope="module")
def json_node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_LOG_FORMAT": "json",
        "GATEWAY_LOG_LEVEL": "INFO",
    }
    node = spawn("node-json-logs", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("json-logs"), port)
    try:
        wait_http(node)
        yield node
    finally:
        node.stop()


def entries(node: Process) -> list[Entry]:
    """Every line of the node's log, each a JSON object."""
    return [json.loads(line) for line in node.output().splitlines() if line.strip()]


async def wait_for_entries(node: Process, wanted: Callable[[Entry], bool], timeout: float = 15.0) -> list[Entry]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = [e for e in entries(node) if wanted(e)]
        if found or asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.1)


async def test_every_line_is_json_and_an_access_line_carries_its_request(json_node: Process, team: Team) -> None:
    async with httpx.AsyncClient(base_url=json_node.http) as client:
        answer = await client.get("/api/me", params={"token": team.token, "probe": "access"})
    assert answer.status_code == 200
    found = await wait_for_entries(
        json_node, lambda e: e["logger"] == "gateway.access" and "probe=access" in e.get("path", "")
    )
    assert len(found) == 1, entries(json_node)
    line = found[0]
    assert (line["method"], line["status"], line["level"]) == ("GET", 200, "info")
    assert line["path"] == "/api/me?token=[redacted]&probe=access"
    assert isinstance(line["duration_ms"], float) and 0 <= line["duration_ms"] < 10_000
    assert team.token not in json_node.output()


async def test_an_ingest_requests_lines_carry_its_trace_id_and_its_clusters_and_teams(
    json_node: Process, team: Team
) -> None:
    trace_id = os.urandom(16).hex()
    headers = {"authorization": f"Bearer {team.cluster_key}", "traceparent": f"00-{trace_id}-00f067aa0ba902b7-01"}
    async with httpx.AsyncClient(base_url=json_node.http) as client:
        answer = await client.post("/api/ingest/jobs", headers=headers, json={"jobs": "not a list"})
    assert answer.status_code == 422
    found = await wait_for_entries(json_node, lambda e: e.get("request_id") == trace_id)
    access = [e for e in found if e["logger"] == "gateway.access"]
    assert len(access) == 1, entries(json_node)
    assert (access[0]["path"], access[0]["status"]) == ("/api/ingest/jobs", 422)
    assert (access[0]["cluster_id"], access[0]["team_id"]) == (team.cluster_id, team.id)


async def test_a_websocket_closed_by_the_server_is_logged_once_with_code_duration_and_bytes(
    json_node: Process, stack: Stack, team: Team
) -> None:
    short = issue_token(stack.secret, team.user_id, 2)  # the node closes it with 4001 when it expires
    async with Follower(json_node.ws, short) as f:
        await f.subscribe(f"team:{team.id}")
        await f.wait_for(lambda f: f.channels[f"team:{team.id}"].snapshot_done)
        await f.wait_for(lambda f: f.closed is not None, timeout=10)
    found = await wait_for_entries(
        json_node, lambda e: e.get("event") == "websocket_closed" and e.get("user_id") == team.user_id
    )
    assert len(found) == 1, found
    line = found[0]
    assert line["code"] == 4001 and line["level"] == "info" and line["logger"] == "gateway.web.websocket.ws"
    assert 1000 <= line["duration_ms"] < 10_000
    assert line["bytes_sent"] > 0 and line["frames_sent"] >= 1  # the snapshot at least
    assert line["message"].startswith("websocket closed: code 4001 after ")


async def test_a_websocket_the_client_closes_is_logged_once(json_node: Process, team: Team) -> None:
    async with Follower(json_node.ws, team.token) as f:
        await f.subscribe(f"team:{team.id}")
        await f.wait_for(lambda f: f.channels[f"team:{team.id}"].snapshot_done)
    found = await wait_for_entries(
        json_node, lambda e: e.get("event") == "websocket_closed" and e.get("user_id") == team.user_id
    )
    assert len(found) == 1, found
    assert found[0]["code"] in (None, 1000) and found[0]["bytes_sent"] > 0
    assert len(found[0]["connection_id"]) == 16  # the id every line about this connection carries


async def test_a_close_line_counts_the_live_frames_the_client_was_delivered(
    json_node: Process, team: Team, pool: asyncpg.Pool
) -> None:
    """Live frames go from the hub straight to the socket, past the connection's own counters (a client that got
    23 MiB was logged with 0.7 MB): the close line's `bytes_delivered`, what the client's TCP acknowledged, holds
    at least every byte the client read."""
    headers = {"Authorization": f"Bearer {team.token}"}
    read = 0
    async with websockets.connect(json_node.ws, additional_headers=headers, compression=None) as ws:
        await ws.send(json.dumps({"type": "subscribe", "channel": f"trajectory:{team.trajectory_id}"}))
        jobs: set[int] = set()
        inserted = False
        async with asyncio.timeout(30):
            while len(jobs) < 40:
                message = await ws.recv()
                read += len(message)
                parsed = json.loads(message)
                if parsed["type"] == "snapshot" and parsed.get("final", True) and not inserted:
                    await insert_jobs(pool, team, 40)  # live, in batches, once the snapshot is in
                    inserted = True
                elif parsed["type"] == "batch":
                    jobs.update(j["id"] for j in parsed.get("jobs") or ())
    found = await wait_for_entries(
        json_node, lambda e: e.get("event") == "websocket_closed" and e.get("user_id") == team.user_id
    )
    assert len(found) == 1, found
    line = found[0]
    assert line["bytes_delivered"] >= read > 0, line
    assert "bytes delivered" in line["message"], line


async def test_a_node_says_where_it_listens_and_passed_health_checks_write_no_line(
    stack: Stack, team: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """With GATEWAY_HEALTH_PORT set a node never logged the addresses it listens on, and a load balancer's health
    checks wrote an INFO line every 2 s per node."""
    port, health = free_port(), free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_LOG_FORMAT": "json",
        "GATEWAY_HEALTH_PORT": str(health),
    }
    node = spawn("node-listening", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("listening"), port)
    try:
        wait_http(node)
        said = [e["message"] for e in entries(node) if e["message"].startswith("listening on")]
        assert said == [
            f"listening on http://127.0.0.1:{port} (clients) and http://127.0.0.1:{health} (health checks and"
            " metrics only)"
        ]
        async with httpx.AsyncClient() as client:
            for _ in range(5):  # as HAProxy checks, on both ports
                assert (await client.get(f"http://127.0.0.1:{health}/readyz")).status_code == 200
                assert (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
            me = await client.get(f"http://127.0.0.1:{port}/api/me", headers={"Authorization": f"Bearer {team.token}"})
            assert me.status_code == 200
        found = await wait_for_entries(node, lambda e: e.get("path") == "/api/me")
        assert len(found) == 1  # other requests are still logged
        assert [e for e in entries(node) if e.get("path") in ("/healthz", "/readyz")] == []
    finally:
        node.stop()
