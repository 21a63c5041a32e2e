"""What a cluster writes is bounded in bytes, each bound replayed against real processes: a
flood of long errors leaves each channel's history and Redis within their bounds and an old cursor gets a
snapshot rather than a replay of the flood; creating past a team's hourly budget is refused whole; a Redis out
of memory refuses the relay, which keeps its place, and once memory is raised every change arrives.

A world of its own: its own Valkey (the last test sets its `maxmemory`), a relay with a 1 MiB history per
channel, and a node with small creation budgets.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import httpx
import pytest
from redis.asyncio import Redis

from gateway.bus import keys
from gateway.bus.broker import RedisBroker
from gateway.bus.connection import Bus
from gateway.bus.errors import BusRefused
from gateway.bus.publisher import CALL_BYTES
from gateway.core.publication import Publication
from harness.follower import Follower
from harness.waiting import eventually
from harness.world import World, spawn, wait_http
from tests.conftest import create_database, drop_database
from tests.integration.conftest import Team, make_team

HISTORY_BYTES = 1 << 20
JOBS_PER_HOUR = 3000
TRAJECTORIES_PER_HOUR = 5
ERROR = 4000  # the longest error a job may carry (gateway.core.ingest.MAX_ERROR)


@pytest.fixture(scope="module")
def bounded(pg_admin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    from gateway.embedded import EmbeddedValkey, free_port

    database_url = create_database(pg_admin)
    valkey = EmbeddedValkey(tmp_path_factory.mktemp("valkey-bounds"))
    valkey.start()
    logdir = tmp_path_factory.mktemp("bounds-logs")
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": f"redis://127.0.0.1:{valkey.port}/0",
        "GATEWAY_SECRET": secrets.token_urlsafe(32),
        "GATEWAY_HISTORY_BYTES": str(HISTORY_BYTES),
        "GATEWAY_MAX_NEW_JOBS_PER_HOUR": str(JOBS_PER_HOUR),
        "GATEWAY_MAX_NEW_TRAJECTORIES_PER_HOUR": str(TRAJECTORIES_PER_HOUR),
        "GATEWAY_CLUSTER_SILENT_AFTER": "3600",
        "GATEWAY_LOG_LEVEL": "INFO",
    }
    port = free_port()
    node = spawn("bnode", ["serve", "--port", str(port)], env, logdir, port)
    world = World(database_url, valkey, env["GATEWAY_SECRET"], env, logdir, [node])
    world.start_relay("brelay")
    try:
        wait_http(node)
        yield world
    finally:
        world.stop_relays()
        node.stop()
        valkey.stop()
        drop_database(pg_admin, database_url)


@pytest.fixture
async def bpool(bounded: World) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(bounded.database_url, min_size=1, max_size=4)
    yield pool
    await pool.close()


@pytest.fixture
async def redis(bounded: World) -> AsyncIterator[Redis]:
    client = Redis.from_url(bounded.redis_url)
    yield client
    await client.aclose()


async def post(world: World, key: str, path: str, body: object) -> httpx.Response:
    async with httpx.AsyncClient(base_url=world.nodes[0].http, timeout=60) as client:
        return await client.post(path, json=body, headers={"Authorization": f"Bearer {key}"})


async def create_jobs(world: World, team: Team, n: int) -> list[int]:
    new = [
        {"status": "queued", "trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "Frame", "frame": i}
        for i in range(n)
    ]
    response = await post(world, team.cluster_key, "/api/ingest/jobs", {"jobs": new})
    assert response.status_code == 200, response.text
    return [j["id"] for j in response.json()["jobs"]]


async def history_bytes(redis: Redis, channel: str) -> tuple[int, int, int]:
    """(entries, bytes of their messages, Redis's own count of the stream's memory) of a channel's history."""
    tag = keys.Partitions().tag(0)
    entries: list[Any] = await redis.xrange(keys.history(tag, channel))
    usage = await redis.memory_usage(keys.history(tag, channel), samples=0) or 0
    return len(entries), sum(len(fields[b"m"]) for _, fields in entries), usage


async def test_a_flood_of_long_errors_stays_within_the_history_s_bytes_and_an_old_cursor_gets_a_snapshot(
    bounded: World, bpool: asyncpg.Pool, redis: Redis
) -> None:
    """A flood of long errors, scaled to this world: 1,000 jobs failing six times with 4,000-character errors (some
    24 MB of deltas on each of the team's job channels). Each channel's history stays within its bytes, Redis
    grows by no more than the histories' bounds, and a client that left before the flood resumes with a
    snapshot of the jobs as they are, never a replay of the flood."""
    team = await make_team(bpool, bounded.secret)
    channels = [f"team-jobs:{team.id}", f"trajectory:{team.trajectory_id}"]
    ids = await create_jobs(bounded, team, 1000)
    async with Follower(bounded.nodes[0].ws, team.token) as left:
        for channel in channels:
            await left.subscribe(channel)
        await left.wait_for(lambda f: all(len(f.listed(c)) == 1000 for c in channels), timeout=30)
    before = (await redis.info("memory"))["used_memory"]
    rounds = 6
    for attempt in range(1, rounds + 1):
        error = f"attempt {attempt}: " + "x" * (ERROR - 12)
        for chunk in range(0, len(ids), 500):
            reports = [
                {"id": job_id, "attempt": attempt, "status": "failed", "error": error}
                for job_id in ids[chunk : chunk + 500]
            ]
            response = await post(bounded, team.cluster_key, "/api/ingest/jobs", {"jobs": reports})
            assert response.json()["updated"] == len(reports), response.text

    def all_failed(f: Follower, channel: str) -> bool:
        listed = f.listed(channel)
        return len(listed) == 1000 and all(j["attempts"] == rounds and j["status"] == "failed" for j in listed.values())

    async with Follower(bounded.nodes[0].ws, team.token) as late:  # the flood has gone out
        for channel in channels:
            await late.subscribe(channel)
        await late.wait_for(lambda f: all(all_failed(f, c) for c in channels), timeout=60)
    for channel in channels:
        entries, size, usage = await history_bytes(redis, channel)
        print(f"{channel}: {entries} entries, {size} bytes of messages, MEMORY USAGE {usage}")
        assert entries >= 2 and size <= HISTORY_BYTES, (channel, entries, size)
        assert usage <= HISTORY_BYTES * 1.25, (channel, entries, size, usage)  # Redis's own overhead on top

    async def settled() -> int:
        return int((await redis.info("memory"))["used_memory"]) - int(before)

    grown = await settled()
    for _ in range(100):  # nodes' output buffers drain once the flood is read
        if grown <= 3 * HISTORY_BYTES + (4 << 20):
            break
        await asyncio.sleep(0.1)
        grown = await settled()
    print(f"Redis grew by {grown} bytes")
    assert grown <= 3 * HISTORY_BYTES + (4 << 20), grown  # three channels' histories, and some slack

    await left.reconnect()  # resumes each channel from its cursor from before the flood
    await left.wait_for(lambda f: all(all_failed(f, c) for c in channels), timeout=60)
    assert all(left.channels[c].snapshots == 2 and left.channels[c].resyncs == 0 for c in channels)
    assert left.problems == [] and left.errors == []
    assert all(f.listed(c)[ids[0]]["error"].startswith(f"attempt {rounds}:") for f in (left,) for c in channels)


async def test_a_team_s_clusters_create_no_more_than_their_hourly_budget(bounded: World, bpool: asyncpg.Pool) -> None:
    """Past what is left of the team's hour, a batch is refused whole (429 with Retry-After, nothing written);
    what still fits goes through, and another team has its own budget. Trajectories, analyses and submissions
    share theirs."""
    team, other = await make_team(bpool, bounded.secret), await make_team(bpool, bounded.secret)
    await create_jobs(bounded, team, JOBS_PER_HOUR - 100)
    new = [{"status": "queued", "trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "Frame"}] * 200
    refused = await post(bounded, team.cluster_key, "/api/ingest/jobs", {"jobs": new})
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"] == "quota_exceeded"
    assert "GATEWAY_MAX_NEW_JOBS_PER_HOUR" in refused.json()["message"]
    assert int(refused.headers["retry-after"]) >= 1
    count = "select count(*) from jobs where team_id = $1"
    assert await bpool.fetchval(count, team.id) == JOBS_PER_HOUR - 100  # nothing of the batch
    assert len(await create_jobs(bounded, team, 90)) == 90  # what is left still fits
    assert len(await create_jobs(bounded, other, 200)) == 200

    answers = [
        await post(bounded, team.cluster_key, "/api/ingest/trajectories", {"name": f"run {i}"}) for i in range(4)
    ]
    answers.append(
        await post(
            bounded, team.cluster_key, "/api/ingest/analyses", {"trajectory_id": team.trajectory_id, "plugin": "RDF"}
        )
    )
    answers.append(await post(bounded, team.cluster_key, "/api/ingest/submissions", {"title": "Upload"}))
    assert [a.status_code for a in answers] == [200] * TRAJECTORIES_PER_HOUR + [429], [a.text for a in answers]
    assert answers[-1].json()["error"] == "quota_exceeded" and "retry-after" in answers[-1].headers
    trajectories = "select count(*) from trajectories where team_id = $1"
    assert await bpool.fetchval(trajectories, team.id) == 5  # the fixture's and four
    assert (await post(bounded, other.cluster_key, "/api/ingest/trajectories", {"name": "theirs"})).status_code == 200


async def test_a_redis_out_of_memory_refuses_the_relay_which_keeps_its_place_and_loses_nothing(
    bounded: World, bpool: asyncpg.Pool, redis: Redis
) -> None:
    """Redis at its `maxmemory` (noeviction) refuses every write: the relay's publish fails as a whole, it says
    why, and it keeps the cycle and its place in the outbox; once memory is raised, every change arrives, in
    order, with no resync."""
    team = await make_team(bpool, bounded.secret)
    channel = f"trajectory:{team.trajectory_id}"
    relay = bounded.relays[0]
    cursor_key = keys.relay_cursor(keys.Partitions().tag(0))
    async with Follower(bounded.nodes[0].ws, team.token) as f:
        await f.subscribe(channel)
        await f.wait_for(lambda f: f.channels[channel].snapshot_done)
        logged = relay.output().count("used memory > 'maxmemory'")
        assert await redis.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        await redis.config_set("maxmemory", 1)  # below what it holds: every write refused
        try:
            place = await redis.get(cursor_key)
            ids = await create_jobs(bounded, team, 50)
            await eventually(
                lambda: relay.output().count("used memory > 'maxmemory'") > logged + 1, "the relay's refusals", 30
            )
            assert await redis.get(cursor_key) == place  # it kept its place
            assert f.listed(channel) == {}
        finally:
            await redis.config_set("maxmemory", 0)
        await f.wait_for(lambda f: sorted(f.listed(channel)) == ids, timeout=30)
        assert await redis.get(cursor_key) != place
    assert f.problems == [] and f.errors == [] and f.channels[channel].resyncs == 0


async def test_a_cycle_redis_refuses_part_way_goes_out_again_each_message_once(bounded: World, redis: Redis) -> None:
    """A cycle larger than one call goes out in several; Redis, near its `maxmemory`, runs the first and refuses
    the next (a call is refused whole: its first write is one Redis checks). The relay sends the cycle again:
    what went out the first time is not published twice, and the history holds each message once, in order.
    How much room makes Redis refuse exactly there depends on how it counts the calls' buffers: the test tries
    margins until it does."""
    broker = RedisBroker(Bus(bounded.redis_url.rsplit("/", 1)[0] + "/2"))
    tag = broker.partitions.tags[0]
    publisher = broker.publisher(tag, 1, 1000, 60, history_bytes=64 << 20)
    big = b"x" * (100 << 10)
    payload = b"\xdb" + len(big).to_bytes(4) + big  # a string in MessagePack: the history holds these

    def cycle(channel: str) -> list[Publication]:
        return [Publication(channel=channel, epoch=1, seq=seq, json=b"{}", msgpack=payload) for seq in range(1, 31)]

    assert sum(len(p.json) + len(p.msgpack) for p in cycle("")) > 2 * CALL_BYTES  # three calls
    try:
        await publisher.take_over()
        for margin in range(0, 5 * CALL_BYTES, CALL_BYTES // 8):
            channel = f"trajectory:{10**9 + secrets.randbelow(10**6)}"
            used = int((await redis.info("memory"))["used_memory"])
            await redis.config_set("maxmemory", used + margin)
            try:
                await publisher.publish(cycle(channel), relay_cursor="7:7")
                raise AssertionError("Redis took the whole cycle: no margin made it refuse part of it")
            except BusRefused as exc:
                assert str(exc).startswith("OutOfMemoryError: ")
                position = await broker.history.position(tag, channel)
            finally:
                await redis.config_set("maxmemory", 0)
            if position is not None:
                break  # the first call went out, then Redis refused
        assert position is not None and 1 < position[1] < 30
        assert await broker.bus.redis.get(keys.relay_cursor(tag)) is None  # the relay's place: not moved
        await publisher.publish(cycle(channel), relay_cursor="7:7")  # as the relay retries
        entries = await broker.history.entries(tag, channel, 1)
        assert [e.seq for e in entries] == list(range(1, 31))
        assert await broker.history.position(tag, channel) == (1, 30)
        assert await broker.bus.redis.get(keys.relay_cursor(tag)) == b"7:7"
    finally:
        await broker.bus.redis.flushdb()
        await broker.aclose()
