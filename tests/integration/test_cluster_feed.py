"""A cluster holds the gateway's URL and its key, nothing else: its commands come on its own feed (`cluster:<id>`
on /ws), its confirmations go over HTTP, and the commands wait in PostgreSQL for a cluster that is away.

The attack of issue 47 (a cluster of team 2 read team 1's history and live messages, and published a forged
notice a team-1 browser showed) is replayed through the surface a cluster now has."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import websockets

from gateway.embedded import free_port
from gateway.sim.cluster import SimCluster
from harness.follower import Follower
from harness.world import Process, spawn, wait_http
from tests.conftest import Stack
from tests.integration.conftest import Team, make_team
from tests.integration.test_actions import act, work


def feed(cluster_id: int) -> str:
    return f"cluster:{cluster_id}"


async def confirm(stack: Stack, key: str, body: object) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        if isinstance(body, bytes):
            return await client.post(
                "/api/ingest/confirmations", content=body, headers={"Authorization": f"Bearer {key}"}
            )
        return await client.post("/api/ingest/confirmations", json=body, headers={"Authorization": f"Bearer {key}"})


async def kept(pool: asyncpg.Pool, cluster_id: int) -> list[asyncpg.Record]:
    return await pool.fetch(
        "select id, jobs, confirmed_at, confirmed_jobs from cluster_commands where cluster_id = $1 order by seq",
        cluster_id,
    )


async def test_a_cluster_of_another_team_with_only_its_key_reaches_nothing_of_team_one(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """Issue 47's attempts, through what a cluster holds now: team 1's history and live messages, another
    cluster's commands, and a forged notice on team:1. Each is refused, and team 1's browser hears nothing."""
    other = await make_team(pool, stack.secret)
    channels = [f"team:{team.id}", f"team-jobs:{team.id}", f"trajectory:{team.trajectory_id}", feed(team.cluster_id)]
    async with (
        Follower(stack.nodes[0].ws, team.token) as browser,
        Follower(stack.nodes[1].ws, other.cluster_key) as attacker,
    ):
        await browser.subscribe(f"team:{team.id}")
        await browser.wait_for(lambda f: f.channels[f"team:{team.id}"].snapshot_done)
        for name in channels:
            await attacker.subscribe(name)
        # Its own feed it may follow: the refusals below are about whose channels they are.
        await attacker.subscribe(feed(other.cluster_id))
        await attacker.wait_for(lambda f: len(f.errors) == len(channels) and feed(other.cluster_id) in f.channels)
        assert sorted((e["code"], e["channel"]) for e in attacker.errors) == sorted(
            ("forbidden", name) for name in channels
        )
        # A forged notice has nowhere to go: a client's message that is not subscribe, unsubscribe or ping.
        forged = (
            f'{{"type": "notice", "channel": "team:{team.id}", "seq": 1, "cursor": "1-1", "trajectory_id": 1,'
            ' "wave": 1, "title": "Pay here", "level": "success"}'
        )
        await attacker.send_raw(forged)
        await attacker.wait_for(lambda f: any(e["code"] == "bad_message" for e in f.errors))
        # A person of team 1 may not follow a cluster's feed either, its own team's included.
        await browser.subscribe(feed(team.cluster_id))
        await browser.wait_for(lambda f: any(e.get("channel") == feed(team.cluster_id) for e in f.errors))
        assert [e["code"] for e in browser.errors] == ["forbidden"]
        # And the browser heard nothing of the attacker's (only its snapshot came).
        assert [m["type"] for m in browser.messages if m.get("channel") == f"team:{team.id}"] == ["snapshot"]
    # Another cluster's command may not be confirmed by it: the same 404 as one that does not exist.
    gpu = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    try:
        jobs = await work(gpu, team, 2)
        response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running")
        assert response.json()["unconfirmed"] == ["gpu-1"]  # its feed is not open: named at once
        (command,) = await kept(pool, team.cluster_id)
        stolen = await confirm(stack, other.cluster_key, {"command": command["id"], "jobs": jobs})
        missing = await confirm(stack, other.cluster_key, {"command": "no-such-command", "jobs": []})
        assert (stolen.status_code, stolen.json()["error"]) == (404, "not_found")
        assert stolen.json()["message"].replace(command["id"], "X") == missing.json()["message"].replace(
            "no-such-command", "X"
        )
        assert (await kept(pool, team.cluster_id))[0]["confirmed_at"] is None
    finally:
        await gpu.http.aclose()


async def test_a_handshake_with_a_wrong_key_or_from_a_page_is_refused(stack: Stack, team: Team) -> None:
    wrong = team.cluster_key.split(".")[0] + ".not-the-secret"
    for key, origin, status in ((wrong, None, 401), (team.cluster_key, stack.nodes[0].http, 403)):
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with Follower(stack.nodes[0].ws, key, origin=origin):
                pass
        assert refused.value.response.status_code == status


async def test_bad_confirmations_are_refused_and_change_nothing_and_a_repeat_changes_nothing(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    gpu = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    try:
        jobs = await work(gpu, team, 2)
        await act(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running")  # nobody listens
        (command,) = await kept(pool, team.cluster_id)
        key, command_id = team.cluster_key, command["id"]
        refusals = [
            (b"{not json", 400),
            ({"command": command_id, "jobs": [jobs[0], 999_999_999]}, 422),  # a job it was not asked about
            ({"command": command_id, "jobs": ["650"]}, 422),
            ({"command": command_id, "jobs": [], "cluster_id": 1}, 422),
            ({"command": "", "jobs": []}, 422),
            ({"command": "x" * 101, "jobs": []}, 422),
        ]
        for body, status in refusals:
            response = await confirm(stack, key, body)
            assert response.status_code == status, (body, response.text)
            assert response.json()["message"]
        assert (await kept(pool, team.cluster_id))[0]["confirmed_at"] is None
        first = await confirm(stack, key, {"command": command_id, "jobs": [jobs[0]]})
        assert (first.status_code, first.json()) == (200, {"repeated": False})
        recorded = (await kept(pool, team.cluster_id))[0]
        again = await confirm(stack, key, {"command": command_id, "jobs": jobs})
        assert (again.status_code, again.json()) == (200, {"repeated": True})
        assert (await kept(pool, team.cluster_id))[0] == recorded  # the first one counts
        assert list(recorded["confirmed_jobs"]) == [jobs[0]]
    finally:
        await gpu.http.aclose()


async def test_a_command_sent_while_the_feed_is_down_reaches_the_cluster_once_when_it_connects(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    gpu = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    try:
        jobs = await work(gpu, team, 3)
        response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running")
        assert response.json()["message"] == "Removing 3 job(s) on gpu-1: not confirmed yet"
        await gpu.start()  # its feed opens: the snapshot holds the command
        (command,) = await kept(pool, team.cluster_id)
        await wait_until(lambda: gpu.carried_out.get(command["id"]) is not None)
        await wait_for_rows(pool, "select count(*) = 3 from jobs where id = any($1) and removed_at is not null", jobs)
        await wait_for_rows(pool, "select confirmed_at is not null from cluster_commands where id = $1", command["id"])
        # Connected again, it is not sent again: a confirmed command leaves the feed.
        async with Follower(stack.nodes[1].ws, team.cluster_key) as again:
            await again.subscribe(feed(team.cluster_id))
            await again.wait_for(lambda f: f.channels[feed(team.cluster_id)].snapshot_done)
            snapshot = next(m for m in again.messages if m["type"] == "snapshot")
            assert snapshot["commands"] == []
        assert list(gpu.carried_out) == [command["id"]]
    finally:
        await gpu.stop()


@pytest.fixture
def own_node(stack: Stack, tmp_path: Path) -> Iterator[tuple[Process, dict[str, str], Path]]:
    """A node of the test's own, which it may stop and start again on the same port."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
    }
    node = spawn("feed-node", ["serve", "--port", str(port)], env, tmp_path, port)
    try:
        wait_http(node)
        yield node, env, tmp_path
    finally:
        node.stop()


async def test_a_command_survives_a_restart_of_the_node_holding_the_feed(
    stack: Stack, pool: asyncpg.Pool, team: Team, own_node: tuple[Process, dict[str, str], Path]
) -> None:
    node, env, logdir = own_node
    gpu = SimCluster(node.http, team.cluster_key, workers=0, report_metrics=False)
    await gpu.start()
    restarted: Process | None = None
    try:
        jobs = await work(gpu, team, 2, "failed")
        node.stop()  # the feed's node goes away; the cluster keeps trying to connect
        response = await act(stack, team, f"/api/trajectories/{team.trajectory_id}/retry-failed")
        assert response.json()["unconfirmed"] == ["gpu-1"]
        restarted = spawn("feed-node-again", ["serve", "--port", str(node.port)], env, logdir, node.port)
        wait_http(restarted)
        (command,) = await kept(pool, team.cluster_id)
        await wait_for_rows(
            pool, "select confirmed_at is not null from cluster_commands where id = $1", command["id"], timeout=60
        )
        assert list(gpu.carried_out) == [command["id"]]
        assert sorted(gpu.carried_out[command["id"]]) == sorted(jobs)
        await wait_for_rows(
            pool, "select count(*) = 2 from jobs where id = any($1) and status = 'retrying' and attempts = 2", jobs
        )
    finally:
        await gpu.stop()
        if restarted is not None:
            restarted.stop()


async def test_gateway_simulate_with_only_the_url_and_a_key_has_remove_and_retry_confirmed(
    stack: Stack, pool: asyncpg.Pool, team: Team, tmp_path: Path
) -> None:
    """`gateway simulate --url --cluster-key`, with no REDIS_URL and no DATABASE_URL in its environment, runs its
    cluster end to end: its own work, then Remove Running Jobs and Retry Failed Jobs confirmed."""
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL") and "GATEWAY" not in k}
    argv = [sys.executable, "-m", "gateway.cli", "simulate", "--url", stack.nodes[0].http]
    # Small trajectories, briskly: the analyses that may be preempted (what Retry Failed Jobs acts on) wait behind
    # pipelines of at most 30 jobs, not 120, so the wait for one is seconds (at 40 frames and speed 20 it ran 20 s
    # to 85 s). Nothing asserted depends on the workload's size or pace.
    argv += ["--cluster-key", team.cluster_key, "--speed", "40", "--frames", "10"]
    with open(tmp_path / "simulate.log", "wb") as log:
        simulate = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # A job seen running may finish before the request arrives (the cluster runs at speed 20), so each action
        # is tried on what is in hand until it finds work to act on; every answer must be confirmed.
        removed = await act_on_some(
            stack,
            pool,
            team,
            "select trajectory_id from jobs where cluster_id = $1 and status = 'running' and removed_at is null"
            " group by trajectory_id order by count(*) desc limit 1",
            "remove-running",
        )
        assert removed["acted"] > 0, removed
        retried = await act_on_some(
            stack,
            pool,
            team,
            "select trajectory_id from jobs where cluster_id = $1 and status in ('failed', 'preempted')"
            " and removed_at is null limit 1",
            "retry-failed",
        )
        assert retried["acted"] > 0, retried
        assert simulate.poll() is None, (tmp_path / "simulate.log").read_text()
    finally:
        simulate.terminate()
        simulate.wait(15)
    assert "Traceback" not in (tmp_path / "simulate.log").read_text()


async def act_on_some(
    stack: Stack, pool: asyncpg.Pool, team: Team, scope_query: str, action: str, timeout: float = 120.0
) -> dict[str, object]:
    """The answer to `action` on a trajectory `scope_query` finds, the first that acted on something."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        scope = await wait_for_value(pool, scope_query, team.cluster_id, timeout=timeout)
        answer = (await act(stack, team, f"/api/trajectories/{scope}/{action}")).json()
        assert answer["unconfirmed"] == [], answer
        if answer["acted"] > 0 or asyncio.get_running_loop().time() > deadline:
            return answer
        await asyncio.sleep(0.1)


async def wait_until(predicate: object, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "not within the deadline"
        await asyncio.sleep(0.05)


async def wait_for_rows(pool: asyncpg.Pool, query: str, *args: object, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await pool.fetchval(query, *args):
        assert asyncio.get_running_loop().time() < deadline, f"not within {timeout} s: {query}"
        await asyncio.sleep(0.1)


async def wait_for_value(pool: asyncpg.Pool, query: str, *args: object, timeout: float = 60.0) -> object:
    deadline = asyncio.get_running_loop().time() + timeout
    while (value := await pool.fetchval(query, *args)) is None:
        assert asyncio.get_running_loop().time() < deadline, f"not within {timeout} s: {query}"
        await asyncio.sleep(0.1)
    return value
