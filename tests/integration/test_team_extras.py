"""The team channel's extras: members online across gateway nodes, and the clusters' live metrics."""

from __future__ import annotations

import asyncio
import os
import signal

import asyncpg
import httpx

from gateway.embedded import free_port
from gateway.web.people.auth import issue_token, new_cluster_key
from harness.follower import Follower
from tests.conftest import Stack, spawn, wait_http
from tests.integration.conftest import Team


async def add_member(pool: asyncpg.Pool, team: Team, name: str) -> int:
    user_id = await pool.fetchval("insert into users (name) values ($1) returning id", name)
    await pool.execute("insert into memberships values ($1, $2)", team.id, user_id)
    return user_id


def presence(f: Follower, team: Team) -> dict | None:  # type: ignore[type-arg]
    updates = [m["presence"] for m in f.messages if m["type"] == "presence"]
    snapshots = [m.get("presence") for m in f.messages if m["type"] == "snapshot" and m["channel"] == f"team:{team.id}"]
    return (updates or snapshots or [None])[-1]


async def test_presence_counts_each_user_once_across_nodes_and_drops_a_dead_node(
    stack: Stack, pool: asyncpg.Pool, team: Team, tmp_path_factory
) -> None:
    second = await add_member(pool, team, "Rosalind")
    await add_member(pool, team, "Linus")  # a member who is not online
    second_token = issue_token(stack.secret, second, 3600)
    channel = f"team:{team.id}"
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
    }
    doomed = spawn("node-doomed", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("doomed"), port)
    try:
        await asyncio.to_thread(wait_http, doomed)
        async with Follower(stack.nodes[0].ws, team.token) as tab1, Follower(stack.nodes[1].ws, team.token) as tab2:
            for f in (tab1, tab2):
                await f.subscribe(channel)
            await tab1.wait_for(lambda f: (presence(f, team) or {}).get("online") == 1, timeout=10)
            assert presence(tab1, team) == {"online": 1, "members": 3, "users": [team.user_id]}

            other = Follower(doomed.ws, second_token)
            await other.__aenter__()
            await other.subscribe(channel)
            await tab1.wait_for(lambda f: (presence(f, team) or {}).get("online") == 2, timeout=10)
            assert presence(tab1, team)["users"] == sorted([team.user_id, second])  # type: ignore[index]

            doomed.proc.send_signal(signal.SIGKILL)  # its users must drop out within ten seconds or so
            await other.wait_for(lambda f: f.closed is not None)
            started = asyncio.get_running_loop().time()
            await tab1.wait_for(lambda f: (presence(f, team) or {}).get("online") == 1, timeout=15)
            assert asyncio.get_running_loop().time() - started < 11

            async with httpx.AsyncClient(base_url=stack.nodes[1].http) as client:
                members = (
                    await client.get(f"/api/teams/{team.id}/members", headers={"Authorization": f"Bearer {team.token}"})
                ).json()
            assert members["online"] == 1
            me = await pool.fetchval("select name from users where id = $1", team.user_id)
            assert {m["name"]: m["online"] for m in members["members"]} == {"Linus": False, "Rosalind": False, me: True}
            assert members["clusters"] == [{"id": team.cluster_id, "name": "gpu-1"}]  # a job row names its cluster
            await other.__aexit__()
    finally:
        doomed.stop()


async def test_cluster_metrics_average_live_clusters_and_leave_stale_ones_out(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    other_id = await pool.fetchval("insert into clusters (team_id, name) values ($1, 'gpu-2') returning id", team.id)
    other_key, key_hash = new_cluster_key(other_id)
    await pool.execute("update clusters set key_hash = $2 where id = $1", other_id, key_hash)
    channel = f"team:{team.id}"

    async def report(key: str, cpu: float) -> None:
        async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
            response = await client.post(
                "/api/ingest/metrics",
                json={"cpu": cpu, "memory": 50, "disk": 40, "network": 12.5},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert response.status_code == 204

    def stats(f: Follower) -> dict | None:  # type: ignore[type-arg]
        """What the team view shows: the snapshot's figures, then each update's."""
        updates = [
            m["clusters"]
            for m in f.messages
            if m["type"] == "clusters" or (m["type"] == "snapshot" and m.get("clusters"))
        ]
        return updates[-1] if updates else None

    async with Follower(stack.nodes[1].ws, team.token) as f:
        await f.subscribe(channel)
        await report(team.cluster_key, 90)
        await report(other_key, 70)
        await f.wait_for(lambda f: (stats(f) or {}).get("reporting") == 2, timeout=10)
        s = stats(f)
        assert (s["cpu"], s["memory"], s["cpu_high"]) == (80.0, 50.0, False)  # type: ignore[index]
        assert [c["name"] for c in s["clusters"]] == ["gpu-1", "gpu-2"]  # type: ignore[index]
        # gpu-2 goes silent; gpu-1 keeps reporting, each second, until gpu-2 is past its 5 s and left out.
        deadline = asyncio.get_running_loop().time() + 60
        while (stats(f) or {}).get("reporting") != 1:
            assert asyncio.get_running_loop().time() < deadline, f"gpu-2 still counted: {stats(f)}"
            await report(team.cluster_key, 90)
            await asyncio.sleep(1.0)
        s = stats(f)
        assert (s["cpu"], s["cpu_high"]) == (90.0, True)  # type: ignore[index]
        assert {c["name"]: c["live"] for c in s["clusters"]} == {"gpu-1": True, "gpu-2": False}  # type: ignore[index]


async def test_bad_metrics_are_refused(stack: Stack, team: Team) -> None:
    async with httpx.AsyncClient(
        base_url=stack.nodes[0].http, headers={"Authorization": f"Bearer {team.cluster_key}"}
    ) as client:
        assert (
            await client.post("/api/ingest/metrics", json={"cpu": 120, "memory": 1, "disk": 1, "network": 1})
        ).status_code == 422
        assert (await client.post("/api/ingest/metrics", json={"cpu": 1})).status_code == 422


async def test_single_user_and_local_deployments_send_neither(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    from gateway.bus.broker import RedisBroker
    from gateway.bus.connection import Bus
    from gateway.hub.presence import PresenceBoard
    from gateway.relay.extras import TeamExtras

    broker = RedisBroker(Bus(stack.redis_url))
    try:
        off = PresenceBoard(broker.presence, enabled=False)
        await off.add(team.id, team.user_id)  # a single-user node marks nobody
        assert await broker.presence.online(team.id) == set()
        async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
            await client.post(
                "/api/ingest/metrics",
                json={"cpu": 1, "memory": 1, "disk": 1, "network": 1},
                headers={"Authorization": f"Bearer {team.cluster_key}"},
            )
        on = PresenceBoard(broker.presence)
        await on.add(team.id, team.user_id)
        async with pool.acquire() as db:
            both = await TeamExtras(broker).collect(db, 0.0)
            neither = await TeamExtras(broker, presence=False, metrics=False).collect(db, 0.0)
        assert {type(u).__name__ for t, u in both if t == team.id} == {"Presence", "ClusterStats"}
        assert neither == []
        await on.clear()
    finally:
        await broker.aclose()
