"""What operators read: /metrics, /healthz, /readyz."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx

from tests.conftest import Stack
from tests.follower import Follower
from tests.integration.conftest import Team, insert_jobs


def value(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


async def test_metrics_count_connections_frames_and_the_relay(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(f"trajectory:{team.trajectory_id}")
        await f.wait_for(lambda f: f.channels[f"trajectory:{team.trajectory_id}"].snapshot_done)
        (job_id,) = await insert_jobs(pool, team, 1)
        await f.wait_for(lambda f: job_id in f.listed(f"trajectory:{team.trajectory_id}"))
        await asyncio.sleep(1.2)  # the relay reports about once a second
        async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
            text = (await client.get("/metrics")).text
    assert value(text, "gateway_connections") >= 1
    assert value(text, "gateway_subscriptions") >= 1
    assert value(text, "gateway_frames_out_total") >= 2  # the snapshot and the batch at least
    assert value(text, "gateway_bytes_out_total") > 0
    assert value(text, "relay_changes_total") >= 1
    assert value(text, "relay_heartbeat_age_seconds") < 5
    assert "relay_held_back_seconds{" in text and "relay_lag_seconds" in text


async def test_health_and_readiness(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[1].http) as client:
        assert (await client.get("/healthz")).json()["ok"] is True
        ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"ready": True, "problems": []}
