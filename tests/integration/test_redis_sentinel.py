"""Redis under Sentinel: a Valkey primary, its replica and three sentinels (harness/sentinel.py), two nodes and a
relay given only `redis+sentinel://...` as REDIS_URL. The primary is replaced while writers commit: once as
for maintenance (SENTINEL FAILOVER), once lost (SIGKILL). The nodes and the relay follow the primary the
sentinels name (redis-py's Sentinel client; no discovery of our own); every subscriber ends at the database's
state with no gap, and so does one that subscribes afterwards; what commits after the failover reaches them.

After SENTINEL FAILOVER the old primary goes on taking writes from those still connected to it for about ten
seconds, until the sentinels make it a replica: what the relay published there is lost. The relay finds the bus
behind what it published and sends every team's whole state again (gateway.relay.cycle); without that, a team
quiet since would be served its lost state's predecessor in snapshots."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import asyncpg
import pytest

from harness.follower import Follower
from harness.sentinel import EmbeddedValkeySentinel
from tests.conftest import Process, create_database, drop_database, spawn, wait_http
from tests.integration.conftest import Team, follow_each_team, insert_jobs, make_team
from tests.integration.test_nothing_lost import burst, converge
from tests.integration.test_redis_cluster import _ports

TEAMS = 2
CHANGES_ARRIVE_WITHIN = 60.0  # seconds: generous, the machine's two cores are shared


@dataclass
class SentinelWorld:
    database_url: str
    sentinel: EmbeddedValkeySentinel
    env: dict[str, str]
    secret: str
    nodes: list[Process]
    relay: Process


@pytest.fixture(scope="module")
def sworld(pg_admin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelWorld]:
    database_url = create_database(pg_admin)
    logdir = tmp_path_factory.mktemp("sentinel-logs")
    sentinel = EmbeddedValkeySentinel(tmp_path_factory.mktemp("valkey-sentinel"))
    sentinel.start()
    secret = secrets.token_urlsafe(32)
    env = {**os.environ, "DATABASE_URL": database_url, "REDIS_URL": sentinel.url, "GATEWAY_SECRET": secret}
    env.pop("GATEWAY_REDIS_CLUSTER", None)
    nodes = [spawn(f"snode{i}", ["serve", "--port", str(port)], env, logdir, port) for i, port in enumerate(_ports(2))]
    relay = spawn("srelay", ["relay"], env, logdir)
    try:
        for node in nodes:
            wait_http(node)
        yield SentinelWorld(database_url, sentinel, env, secret, nodes, relay)
    finally:
        for process in [*nodes, relay]:
            process.stop()
        sentinel.stop()
        drop_database(pg_admin, database_url)


@pytest.fixture(scope="module")
async def spool(sworld: SentinelWorld) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(sworld.database_url, min_size=1, max_size=8)
    yield pool
    await pool.close()


class Probes:
    """A change committed every half second on the probe team's job; for each, the seconds until every subscriber
    of the team listed it, on both job channels."""

    def __init__(self, pool: asyncpg.Pool, followers: list[Follower], team: Team, job: int) -> None:
        self.pool, self.team, self.job = pool, team, job
        self.followers = [f for f in followers if f"team:{team.id}" in f.channels]
        self.latencies: list[float] = []
        self._arrivals: set[asyncio.Task[None]] = set()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            version = await self.pool.fetchval(
                "update jobs set attempts = attempts + 1 where id = $1 returning version", self.job
            )
            self._arrivals.add(asyncio.create_task(self._arrival(version, time.monotonic())))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.5)
        await asyncio.gather(*self._arrivals)

    async def _arrival(self, version: int, committed: float) -> None:
        channels = (f"trajectory:{self.team.trajectory_id}", f"team-jobs:{self.team.id}")

        def listed(f: Follower) -> bool:
            return all(f.channels[c].jobs.get(self.job, {}).get("version", 0) >= version for c in channels)

        for f in self.followers:
            await f.wait_for(listed, timeout=CHANGES_ARRIVE_WITHIN)
        self.latencies.append(time.monotonic() - committed)


async def write_until(pool: asyncpg.Pool, ids: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        await burst(pool, ids, 0.5, writers=1)


async def replace_primary_mid_stream(world: SentinelWorld, pool: asyncpg.Pool, kill: bool) -> None:
    """Writers commit on the teams' jobs while the primary is replaced and stop soon after (their teams are then
    quiet); a probe team's job changes every half second throughout. Afterwards every subscriber, and one that
    subscribes only then, is at the database's state with no gap and no message twice, and each change the
    probe committed reached every subscriber of its team."""
    await asyncio.to_thread(world.sentinel.replicated)  # a replica in sync, ready to take over
    teams = [await make_team(pool, world.secret) for _ in range(TEAMS + 1)]
    ids = {team.id: await insert_jobs(pool, team, 60) for team in teams}
    followers = await follow_each_team(world.nodes, teams)
    written, probed = asyncio.Event(), asyncio.Event()
    try:
        probes = Probes(pool, followers, teams[-1], ids[teams[-1].id][0])
        writing = [asyncio.create_task(write_until(pool, ids[t.id], written)) for t in teams[:-1]]
        await asyncio.sleep(2.0)  # the load runs a while on the first primary
        old = world.sentinel.primary()
        probing = asyncio.create_task(probes.run(probed))
        began = time.monotonic()
        if kill:
            world.sentinel.kill(old)
            new = await asyncio.to_thread(world.sentinel.promoted, old)
        else:
            new = await asyncio.to_thread(world.sentinel.failover)
        promoted = time.monotonic() - began
        assert new != old
        await asyncio.sleep(2.0)
        written.set()
        await asyncio.gather(*writing)
        if not kill:  # the old primary took the writes until now: they are lost with its demotion
            await asyncio.to_thread(world.sentinel.demoted, old)
        demoted = time.monotonic() - began
        await asyncio.sleep(3.0)
        probed.set()
        await probing
        for i, f in enumerate(followers):
            await converge(f, pool, teams[i % len(teams)], timeout=CHANGES_ARRIVE_WITHIN)
            assert f.problems == [], f.problems
        late = await follow_each_team(world.nodes, teams[:-1])
        followers += late
        for i, f in enumerate(late):
            await converge(f, pool, teams[i % TEAMS], timeout=CHANGES_ARRIVE_WITHIN)
            assert f.problems == [], f.problems
        resyncs = sum(s.resyncs for f in followers for s in f.channels.values())
        latencies = sorted(probes.latencies)
        print(
            f"primary {'killed' if kill else 'failed over'}: the sentinels named the replica after {promoted:.2f} s"
            + ("" if kill else f", the old primary was a replica after {demoted:.2f} s")
            + f"; the probe's changes committed from the failover on reached every subscriber within"
            f" {latencies[-1]:.2f} s (median {latencies[len(latencies) // 2]:.2f} s, {len(latencies)} probes);"
            f" {resyncs} resyncs"
        )
        for process in [*world.nodes, world.relay]:
            assert process.proc.poll() is None, f"{process.name} exited"
            assert "Traceback" not in process.output(), (process.name, process.tracebacks())
    finally:
        written.set()
        probed.set()
        for f in followers:
            await f.__aexit__()


async def test_a_failover_asked_of_the_sentinels_mid_stream_loses_nothing(
    sworld: SentinelWorld, spool: asyncpg.Pool
) -> None:
    await replace_primary_mid_stream(sworld, spool, kill=False)


async def test_a_primary_killed_mid_stream_is_replaced_and_nothing_is_lost(
    sworld: SentinelWorld, spool: asyncpg.Pool
) -> None:
    """A machine lost: the sentinels agree it is down (a second of silence), one promotes the replica. What the
    primary had not replicated yet is gone: subscribers missing it are filled in or resynced, never left short."""
    await replace_primary_mid_stream(sworld, spool, kill=True)


def test_gateway_check_reaches_redis_through_the_sentinels(sworld: SentinelWorld) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check"], env=sworld.env, capture_output=True, text=True, timeout=120
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert "ok       Redis answers" in done.stdout, done.stdout
    assert "ok       REDIS_URL: the primary of 'mymaster', as 3 sentinel(s) name it" in done.stdout, done.stdout
