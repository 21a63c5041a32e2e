"""Nothing lost: resume from a cursor, relay failover with fencing, Redis restarts, subscribes racing bursts.

These tests run their own world (a fresh database, a private Valkey, two nodes, relays) because they kill
and restart its parts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import signal
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import asyncpg
import pytest
from redis.asyncio import Redis

from gateway.bus import keys
from gateway.bus.connection import Bus
from gateway.bus.publisher import Fenced, Publisher
from gateway.core import envelope
from gateway.core.model import Job
from gateway.core.protocol import Batch, encode_both
from gateway.core.publication import Publication
from gateway.core.status import LISTED
from gateway.embedded import EmbeddedValkey, free_port
from harness.follower import Follower
from harness.proxy import Proxy
from harness.world import Process, World, postgres_proxy, spawn, wait_http
from tests.conftest import create_database, drop_database
from tests.integration.conftest import Team, insert_jobs, make_team

HISTORY = 60  # short, so that a test can outrun it


@pytest.fixture(scope="module")
def world(pg_admin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    database_url = create_database(pg_admin)
    valkey = EmbeddedValkey(tmp_path_factory.mktemp("valkey-world"))
    valkey.start()
    logdir = tmp_path_factory.mktemp("world-logs")
    secret = secrets.token_urlsafe(32)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": f"redis://127.0.0.1:{valkey.port}/0",
        "GATEWAY_SECRET": secret,
        "GATEWAY_HISTORY_LENGTH": str(HISTORY),
    }
    nodes = []
    for i in range(2):
        port = free_port()
        nodes.append(spawn(f"wnode{i}", ["serve", "--port", str(port)], env, logdir, port))
    w = World(database_url, valkey, secret, env, logdir, nodes)
    w.start_relay("relay-a")
    try:
        for node in nodes:
            wait_http(node)
        yield w
    finally:
        w.stop_relays()
        for node in nodes:
            node.stop()
        valkey.stop()
        drop_database(pg_admin, database_url)


@pytest.fixture(scope="module")
async def wpool(world: World) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(world.database_url, min_size=1, max_size=12)
    yield pool
    await pool.close()


@pytest.fixture
async def wteam(world: World, wpool: asyncpg.Pool) -> Team:
    return await make_team(wpool, world.secret)


async def burst(pool: asyncpg.Pool, ids: list[int], seconds: float, writers: int = 4, pause: float = 0.002) -> int:
    """Writers committing small random transactions for `seconds`, each `pause` apart; returns how many updates."""
    loop = asyncio.get_running_loop()
    stop = loop.time() + seconds
    done = 0

    async def write(seed: int) -> None:
        nonlocal done
        rng = random.Random(seed)
        statuses = ["queued", "running", "completed", "failed", "retrying"]
        while loop.time() < stop:
            picked = sorted(rng.sample(ids, 3))
            async with pool.acquire() as conn, conn.transaction():
                for job_id in picked:
                    await conn.execute("update jobs set status = $2 where id = $1", job_id, rng.choice(statuses))
            done += len(picked)
            await asyncio.sleep(pause)

    await asyncio.gather(*(write(s) for s in range(writers)))
    return done


async def database_state(pool: asyncpg.Pool, team: Team) -> tuple[dict[int, tuple[str, int]], dict[str, int]]:
    rows = await pool.fetch("select id, status, version from jobs where team_id = $1 and removed_at is null", team.id)
    jobs = {r["id"]: (r["status"], r["version"]) for r in rows}
    counts = dict.fromkeys(LISTED, 0)
    for status, _ in jobs.values():
        counts[status] += 1
    return jobs, counts


async def converge(f: Follower, pool: asyncpg.Pool, team: Team, timeout: float = 20) -> None:
    jobs, counts = await database_state(pool, team)

    def done(f: Follower) -> bool:
        return (
            {i: (j["status"], j["version"]) for i, j in f.listed(f"trajectory:{team.trajectory_id}").items()} == jobs
            and {i: (j["status"], j["version"]) for i, j in f.listed(f"team-jobs:{team.id}").items()} == jobs
            and f.channels[f"team:{team.id}"].counts == counts
        )

    await f.wait_for(done, timeout=timeout)


async def follow(world: World, team: Team, node: int = 0, **kw: bool) -> Follower:
    f = Follower(world.nodes[node].ws, team.token, **kw)
    await f.__aenter__()
    for channel in (f"trajectory:{team.trajectory_id}", f"team-jobs:{team.id}", f"team:{team.id}"):
        await f.subscribe(channel)
    await f.wait_for(lambda f: all(s.snapshot_done for s in f.channels.values()))
    return f


@contextlib.asynccontextmanager
async def one_on_each_node(world: World, team: Team) -> AsyncIterator[list[Follower]]:
    """A follower of the team's channels on each of the first two nodes, resubscribing as a client does on a gap."""
    followers = [await follow(world, team, node=i, resubscribe_on_gap=True) for i in range(2)]
    try:
        yield followers
    finally:
        for f in followers:
            await f.__aexit__()


async def each_converges(followers: list[Follower], pool: asyncpg.Pool, team: Team) -> None:
    for f in followers:
        await converge(f, pool, team, timeout=30)
        assert f.problems == [], f.problems


async def test_reconnect_with_cursor_mid_burst_resumes_without_snapshot(
    world: World, wpool: asyncpg.Pool, wteam: Team
) -> None:
    ids = await insert_jobs(wpool, wteam, 100)
    f = await follow(world, wteam)
    try:
        # About 40 commits a second: the reconnect's cursor stays within the world's history of 60 publishes
        # while a busy machine takes a second or more to reconnect (unpaced, it was outrun: a snapshot, rightly).
        writing = asyncio.create_task(burst(wpool, ids, 2.0, writers=2, pause=0.05))
        await asyncio.sleep(0.8)
        await f.reconnect(world.nodes[1].ws)  # to the other node, with each channel's cursor
        await writing
        await converge(f, wpool, wteam)
        assert {c: s.snapshots for c, s in f.channels.items()} == {c: 1 for c in f.channels}
        assert f.problems == [] and all(s.resyncs == 0 for s in f.channels.values())
    finally:
        await f.__aexit__()


async def test_cursor_older_than_the_history_gets_a_snapshot(world: World, wpool: asyncpg.Pool, wteam: Team) -> None:
    ids = await insert_jobs(wpool, wteam, 20)
    f = await follow(world, wteam)
    try:
        assert f.ws is not None
        await f.ws.close()
        # Outrun the history: MAXLEN ~ keeps up to a stream node (100 entries) past HISTORY, and the relay
        # gathers commits that come closer than its tick into one batch. So write until the channel's seq is
        # far past both.
        channel = f"trajectory:{wteam.trajectory_id}"
        redis = Redis.from_url(world.redis_url)
        try:
            i = 0
            while (i := i + 1) < 5000:
                await wpool.execute(
                    "update jobs set status = $2 where id = $1", ids[i % 20], ("running", "queued")[(i // 20) % 2]
                )
                await asyncio.sleep(0.006)
                if (
                    i % 20 == 0
                    and int(((await redis.get(keys.seq(keys.Partitions(1).tags[0], channel))) or b"0-0").split(b"-")[1])
                    > HISTORY + 200
                ):
                    break
        finally:
            await redis.aclose()
        await f.reconnect()
        await converge(f, wpool, wteam)
        trajectory = f.channels[f"trajectory:{wteam.trajectory_id}"]
        assert trajectory.snapshots == 2 and f.problems == []
    finally:
        await f.__aexit__()


async def test_active_relay_killed_mid_burst_loses_and_repeats_nothing(
    world: World, wpool: asyncpg.Pool, wteam: Team
) -> None:
    ids = await insert_jobs(wpool, wteam, 150)
    world.start_relay("relay-b")  # a standby
    followers = [await follow(world, wteam, node=i % 2) for i in range(4)]
    try:
        active = await world.active_relay()
        writing = asyncio.create_task(burst(wpool, ids, 3.0))
        await asyncio.sleep(1.0)
        active.proc.send_signal(signal.SIGKILL)
        await writing
        for f in followers:
            await converge(f, wpool, wteam)
            assert f.problems == [], f.problems
            assert all(s.resyncs == 0 for s in f.channels.values())
        survivor = await world.active_relay()
        assert survivor is not active
    finally:
        for f in followers:
            await f.__aexit__()


async def test_relay_cut_from_postgres_stops_and_is_fenced_out(world: World, wpool: asyncpg.Pool, wteam: Team) -> None:
    world.stop_relays()
    proxy, proxied = await postgres_proxy(world.database_url)
    try:
        isolated = world.start_relay("relay-proxied", proxied)
        await world.active_relay()
        world.start_relay("relay-direct")  # standby
        ids = await insert_jobs(wpool, wteam, 30)
        f = await follow(world, wteam)
        try:
            old_epoch = int(f.channels[f"team:{wteam.id}"].cursor.split("-")[0])  # type: ignore[union-attr]
            proxy.cut()
            await asyncio.sleep(0.5)
            await wpool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids)
            await converge(f, wpool, wteam)
            new_epoch = int(f.channels[f"team:{wteam.id}"].cursor.split("-")[0])  # type: ignore[union-attr]
            assert new_epoch > old_epoch
            # The cut wakes it and its next read fails, but its successor may take over before it has noticed.
            async with asyncio.timeout(30):
                while "stopped serving" not in isolated.output() and isolated.proc.poll() is None:
                    await asyncio.sleep(0.05)

            # The cut-off relay, were it to publish late, is refused by the fence...
            bus = Bus(world.redis_url)
            redis = bus.redis
            tag = bus.partitions.tag(wteam.id)
            try:
                stale = Publisher(bus, tag, old_epoch, HISTORY, 60)
                channel = f"trajectory:{wteam.trajectory_id}"
                bogus = Job(
                    id=ids[0],
                    team_id=wteam.id,
                    trajectory_id=wteam.trajectory_id,
                    cluster_id=wteam.cluster_id,
                    kind="preprocess",
                    name="stale",
                    status="failed",
                    version=10**9,
                )
                as_json, as_msgpack = encode_both(Batch(channel=channel, seq=10**6, cursor="0-0", jobs=[bogus]))
                with pytest.raises(Fenced):
                    await stale.publish(
                        [Publication(channel=channel, epoch=old_epoch, seq=10**6, json=as_json, msgpack=as_msgpack)]
                    )
                # ... and nodes drop an older epoch's message even if it reaches pub/sub.
                await redis.publish(keys.pubsub(tag, channel), envelope.pack(old_epoch, 10**6, as_json, as_msgpack))
                await asyncio.sleep(0.5)
                assert all(j["name"] != "stale" for j in f.listed(channel).values())
                assert f.problems == []
            finally:
                await bus.aclose()
        finally:
            await f.__aexit__()
    finally:
        await proxy.close()


async def test_redis_restarted_mid_stream_every_subscriber_ends_at_the_database(
    world: World, wpool: asyncpg.Pool, wteam: Team
) -> None:
    if not world.relays or all(r.proc.poll() is not None for r in world.relays):
        world.start_relay("relay-c")
    await world.active_relay()
    ids = await insert_jobs(wpool, wteam, 80)
    async with one_on_each_node(world, wteam) as followers:
        writing = asyncio.create_task(burst(wpool, ids, 4.0, writers=2))
        await asyncio.sleep(1.0)
        await asyncio.to_thread(world.valkey.stop)
        await asyncio.sleep(0.5)
        await asyncio.to_thread(world.valkey.start)
        await writing
        await each_converges(followers, wpool, wteam)


async def test_subscribers_who_arrived_before_the_first_relay_end_at_the_database(
    world: World, wpool: asyncpg.Pool, wteam: Team
) -> None:
    """Nodes up on a bus no relay has started on (new, or restarted empty while no relay ran): a subscriber's
    snapshot is read from PostgreSQL, then changes commit, then the first relay starts and reads the outbox on
    from its own snapshot, which holds those changes: they never come as deltas, so the subscriber reads again."""
    world.stop_relays()
    ids = await insert_jobs(wpool, wteam, 6)
    await asyncio.to_thread(world.valkey.stop)  # Redis keeps nothing: it comes back empty
    await asyncio.to_thread(world.valkey.start)
    async with one_on_each_node(world, wteam) as followers:
        async with wpool.acquire() as db:
            await db.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids[:4])
        world.start_relay("relay-first")
        await world.active_relay()
        await each_converges(followers, wpool, wteam)


async def test_subscribes_racing_a_burst_never_go_backwards(world: World, wpool: asyncpg.Pool, wteam: Team) -> None:
    await world.active_relay()
    ids = await insert_jobs(wpool, wteam, 120)
    writing = asyncio.create_task(burst(wpool, ids, 2.5))
    followers = []
    try:
        for i in range(12):
            await asyncio.sleep(random.uniform(0.05, 0.2))
            followers.append(await follow(world, wteam, node=i % 2))
        await writing
        for f in followers:
            await converge(f, wpool, wteam)
            assert f.problems == [], f.problems
    finally:
        for f in followers:
            await f.__aexit__()


async def test_published_outbox_rows_are_pruned_after_the_retention(
    world: World, wpool: asyncpg.Pool, wteam: Team
) -> None:
    world.stop_relays()
    world.start_relay("relay-pruning", GATEWAY_OUTBOX_RETENTION="1")
    await world.active_relay()
    ids = await insert_jobs(wpool, wteam, 10)
    f = await follow(world, wteam)
    try:
        first = await wpool.fetchval("select max(seq) from job_changes")
        deadline = asyncio.get_running_loop().time() + 60
        round_ = 0
        # Cycles after the retention (1 s) each may prune: changes keep coming until the first rows are gone.
        while await wpool.fetchval("select count(*) from job_changes where seq <= $1", first):
            assert asyncio.get_running_loop().time() < deadline, "published outbox rows were not pruned"
            status = ("running", "queued", "completed")[round_ % 3]
            await wpool.execute("update jobs set status = $2 where id = any($1::bigint[])", ids, status)
            round_ += 1
            await asyncio.sleep(0.5)
        await converge(f, wpool, wteam)
    finally:
        await f.__aexit__()


async def test_a_finish_is_not_repeated_by_a_reconnect_or_a_relay_restart(
    world: World, wpool: asyncpg.Pool, wteam: Team
) -> None:
    world.stop_relays()
    first = world.start_relay("relay-finish-1")
    await world.active_relay()
    f = await follow(world, wteam)
    try:
        ids = await insert_jobs(wpool, wteam, 5)
        await wpool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
        await f.wait_for(lambda f: len(_finishes_seen(f)) >= len(_once_each(wteam)), timeout=10)
        await f.reconnect(world.nodes[1].ws)  # resumes after the notice: nothing to replay
        first.stop()
        world.start_relay("relay-finish-2")
        await world.active_relay()
        await asyncio.sleep(2.0)  # the new relay has settled whatever it would finish
        (job_id,) = await insert_jobs(wpool, wteam, 1)  # proof the stream is live again
        await f.wait_for(lambda f: job_id in f.listed(f"trajectory:{wteam.trajectory_id}"))
        assert _finishes_seen(f) == _once_each(wteam)
    finally:
        await f.__aexit__()


def _finishes_seen(f: Follower) -> list[tuple[str, str]]:
    """Each notice and glow the follower saw, by kind and channel."""
    return sorted((m["type"], m["channel"]) for m in f.messages if m["type"] in ("notice", "glow"))


def _once_each(team: Team) -> list[tuple[str, str]]:
    """One notice on the trajectory's channel, the same on the team's, and one glow (on the team's)."""
    return sorted(
        [("notice", f"trajectory:{team.trajectory_id}"), ("notice", f"team:{team.id}"), ("glow", f"team:{team.id}")]
    )


async def test_a_finish_the_killed_relay_could_not_publish_is_published_by_its_successor(
    world: World, wpool: asyncpg.Pool, wteam: Team
) -> None:
    world.stop_relays()
    doomed = world.start_relay("relay-doomed")
    await world.active_relay()
    f = await follow(world, wteam)
    try:
        ids = await insert_jobs(wpool, wteam, 3)
        await f.wait_for(lambda f: len(f.listed(f"trajectory:{wteam.trajectory_id}")) == 3)
        await wpool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
        await f.wait_for(
            lambda f: all(j["status"] == "completed" for j in f.listed(f"trajectory:{wteam.trajectory_id}").values())
        )
        doomed.proc.send_signal(signal.SIGKILL)  # inside the settle time: the notice was not out yet
        world.start_relay("relay-heir")
        await f.wait_for(lambda f: len(_finishes_seen(f)) >= len(_once_each(wteam)), timeout=15)
        await asyncio.sleep(1.0)  # nothing more comes
        assert _finishes_seen(f) == _once_each(wteam)
    finally:
        await f.__aexit__()


async def test_jobs_past_retention_drop_out_with_exact_counts(world: World, wpool: asyncpg.Pool, wteam: Team) -> None:
    world.stop_relays()
    world.start_relay("relay-retention", GATEWAY_RETENTION="3")
    await world.active_relay()
    old = await insert_jobs(wpool, wteam, 4)
    await wpool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", old)
    f = await follow(world, wteam)
    try:
        await asyncio.sleep(2.0)
        fresh = await insert_jobs(wpool, wteam, 2)
        trajectory = f"trajectory:{wteam.trajectory_id}"
        await f.wait_for(lambda f: set(f.listed(trajectory)) == set(fresh), timeout=10)
        await f.wait_for(lambda f: f.channels[f"team:{wteam.id}"].counts == {**dict.fromkeys(LISTED, 0), "queued": 2})
        # Tombstones stay: a late report cannot bring a job back.
        assert (
            await wpool.fetchval(
                "select count(*) from jobs where id = any($1::bigint[]) and removed_at is not null", old
            )
            == 4
        )
        await converge(f, wpool, wteam)
        assert f.problems == []
    finally:
        await f.__aexit__()


async def test_a_node_is_not_ready_without_an_active_relay(world: World) -> None:
    import httpx

    world.stop_relays()
    async with httpx.AsyncClient(base_url=world.nodes[0].http) as client:
        # Ready until the relay's last heartbeat is too old (seconds): asked until it says otherwise.
        deadline = asyncio.get_running_loop().time() + 60
        while (response := await client.get("/readyz")).json()["problems"] != ["no active relay"]:
            assert asyncio.get_running_loop().time() < deadline, f"still {response.text} without a relay"
            await asyncio.sleep(0.2)
        assert response.status_code == 503
        world.start_relay("relay-back")
        for _ in range(50):
            await asyncio.sleep(0.2)
            if (await client.get("/readyz")).status_code == 200:
                break
        assert (await client.get("/readyz")).status_code == 200


async def test_a_killed_node_s_clients_resume_on_another_node_and_sigterm_tells_them_to_go(
    world: World, wpool: asyncpg.Pool, wteam: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if not any(r.proc.poll() is None for r in world.relays):
        world.start_relay("relay-for-nodes")
    await world.active_relay()
    ids = await insert_jobs(wpool, wteam, 10)

    async def extra_node(name: str) -> Process:
        port = free_port()
        node = spawn(name, ["serve", "--port", str(port)], world.env, tmp_path_factory.mktemp(name), port)
        await asyncio.to_thread(wait_http, node)
        return node

    # SIGKILL: the client notices the drop and resumes elsewhere from its cursors, without a snapshot.
    doomed = await extra_node("wnode-doomed")
    f = Follower(doomed.ws, wteam.token)
    await f.__aenter__()
    try:
        for channel in (f"trajectory:{wteam.trajectory_id}", f"team-jobs:{wteam.id}", f"team:{wteam.id}"):
            await f.subscribe(channel)
        await f.wait_for(lambda f: all(s.snapshot_done for s in f.channels.values()))
        doomed.proc.send_signal(signal.SIGKILL)
        await f.wait_for(lambda f: f.closed is not None)
        await wpool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids)
        await f.reconnect(world.nodes[0].ws)
        await converge(f, wpool, wteam)
        assert all(s.snapshots == 1 for s in f.channels.values()) and f.problems == []
    finally:
        doomed.stop()
        await f.__aexit__()

    # SIGTERM: the node stops accepting and tells its clients to reconnect (1012, service restart).
    leaving = await extra_node("wnode-leaving")
    g = Follower(leaving.ws, wteam.token)
    await g.__aenter__()
    try:
        await g.subscribe(f"team:{wteam.id}")
        await g.wait_for(lambda g: g.channels[f"team:{wteam.id}"].snapshot_done)
        leaving.proc.send_signal(signal.SIGTERM)
        await g.wait_for(lambda g: g.closed is not None)
        assert g.closed is not None and g.closed.rcvd is not None and g.closed.rcvd.code == 1012
        # It drained and shut down cleanly (the server raises the signal again once done: exit by SIGTERM or 0).
        assert await asyncio.to_thread(leaving.proc.wait, 10) in (0, -signal.SIGTERM)
        assert "stopped: every connection closed and the app shut down" in leaving.output()
    finally:
        leaving.stop()
        await g.__aexit__()


# An active relay whose own link stalls (packets dropped, no FIN or RST) gives its partition up to a standby that
# can do the work, instead of holding the lock and publishing nothing until the link heals; the successor reads
# on from the cursor the bus holds.

STEP_DOWN_AFTER = 2.0


async def active_among(world: World, names: set[str]) -> str:
    relay = await world.active_relay(timeout=60)
    assert relay.name in names, relay.name
    return relay.name


async def test_a_relay_whose_redis_link_stalls_steps_down_and_a_standby_carries_on(
    world: World, wpool: asyncpg.Pool, wteam: Team
) -> None:
    world.stop_relays()
    redis = urlsplit(world.redis_url)
    proxy = Proxy(redis.hostname or "127.0.0.1", redis.port or 6379)
    await proxy.start()
    try:
        stalled = world.start_relay(
            "relay-redis-proxied",
            REDIS_URL=f"redis://127.0.0.1:{proxy.port}{redis.path}",
            GATEWAY_RELAY_STEP_DOWN_AFTER=str(STEP_DOWN_AFTER),
        )
        await active_among(world, {stalled.name})
        world.start_relay("relay-standby")
        ids = await insert_jobs(wpool, wteam, 60)
        followers = [await follow(world, wteam, node=i % 2) for i in range(2)]
        try:
            proxy.stall()
            await burst(wpool, ids, 2.0, writers=2)
            # Everything committed while the active relay's link was stalled reaches every subscriber, long
            # before the link heals: the standby took over.
            for f in followers:
                await converge(f, wpool, wteam, timeout=60)
                assert f.problems == [], f.problems
                assert all(s.resyncs == 0 for s in f.channels.values())
            assert await active_among(world, {"relay-standby"}) == "relay-standby"
            assert "stepping down" in stalled.output()
            # Healed, the relay that stepped down stands by; nothing moves backwards.
            proxy.flow()
            await burst(wpool, ids, 1.0, writers=2)
            for f in followers:
                await converge(f, wpool, wteam, timeout=60)
                assert f.problems == [], f.problems
        finally:
            for f in followers:
                await f.__aexit__()
    finally:
        world.stop_relays()
        await proxy.close()


async def test_a_relay_whose_postgres_link_stalls_loses_its_lock_to_a_standby(
    world: World, wpool: asyncpg.Pool, wteam: Team
) -> None:
    world.stop_relays()
    proxy, proxied = await postgres_proxy(world.database_url)
    try:
        stalled = world.start_relay("relay-pg-proxied", proxied)
        await active_among(world, {stalled.name})
        world.start_relay("relay-standby")
        ids = await insert_jobs(wpool, wteam, 40)
        f = await follow(world, wteam)
        try:
            proxy.stall()
            await wpool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids)
            # PostgreSQL ends the silent lock session after its idle limit (gateway.store.partitions); the
            # standby's wait for the lock ends with it.
            await converge(f, wpool, wteam, timeout=90)
            assert f.problems == [], f.problems
            assert all(s.resyncs == 0 for s in f.channels.values())
            assert await active_among(world, {"relay-standby"}) == "relay-standby"
        finally:
            await f.__aexit__()
            proxy.flow()
    finally:
        world.stop_relays()
        await proxy.close()
