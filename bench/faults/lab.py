"""The faults run's world (bench.faults): its sizes, the processes and proxies of one lab, the steady load."""

from __future__ import annotations

import asyncio
import os
import secrets
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from gateway.embedded import EmbeddedPostgres, EmbeddedValkey, free_port
from gateway.store.migrate import migrate
from harness import processes
from harness.faults import FaultProxy
from harness.world import Process, World, postgres_target, via_proxy, wait_http

from ..load import World as Jobs
from ..load import Writer, build_world
from ..markers import Markers
from ..procstat import rss_kb

Progress = Callable[[str], None]


MAX_PENDING = 1 << 20  # the nodes' GATEWAY_MAX_PENDING_BYTES: a stalled client passes it within seconds


SLOW_READ_PAUSE = 0.05  # the slow client's pause after each message it reads: 20 a second


# The slow client's receive buffer: a common default. Not the stalled one's 4 KB: on loopback (64 KB segments)
# a window that small is never reopened by the reader, only found again by the sender's zero-window probes,
# whose backoff grows to tens of seconds: such a client reads about a message a second, not 20.
SLOW_RECEIVE_BUFFER = 128 << 10


@dataclass
class Size:
    teams: int
    trajectories_per_team: int
    jobs_per_trajectory: int
    subscribers: int
    rate: float  # commits a second, 5 job changes each
    before: float  # seconds of load before the fault
    after: float  # seconds of load after it
    stall: float = 60.0  # how long one client reads slowly and another not at all
    half_open: float = 30.0  # how long a link drops everything (no FIN, no RST) before it heals
    latency: float = 60.0  # how long a link adds LATENCY ± JITTER
    throttle: float = 30.0  # how long a link carries THROTTLE at most


# A half-open link lasts past the node's KEEPALIVE (10 s to close its clients when its Redis link goes silent)
# with room to spare on a busy machine: at 12 s, twice in eight runs beside other work, the heal came first. The
# slow and the stalled client fall behind for four keepalives, long enough for a client reading the same channels
# to get well over twice what the node may hold for one. (A keepalive of 5 s, to halve the half-open link,
# closed the slow client: its pong came back later than that behind what it had not read.)
QUICK = Size(
    teams=5, trajectories_per_team=3, jobs_per_trajectory=60, subscribers=300, rate=100, before=1.5, after=3.5,
    half_open=16, latency=4, throttle=4, stall=40,
)  # fmt: skip


FULL = Size(teams=20, trajectories_per_team=4, jobs_per_trajectory=100, subscribers=2_000, rate=200, before=3, after=8)


# The nodes' GATEWAY_KEEPALIVE: a silent Redis link is dead after 6 s, its clients closed by 10 s. Not shorter: the
# slow client's reading reaches the node's kernel in steps of several seconds (what its receive buffer holds, at 20
# messages a second), and at 5 s a step missed an interval and the node closed it (docs/operations.md).
KEEPALIVE = 10.0


LATENCY, JITTER = 0.2, 0.05  # seconds added to every chunk each way, and how much that varies either way
THROTTLE = 1_000_000 / 8  # bytes a second each way: 1 Mbit/s


@dataclass
class Lab:
    """The world, the PostgreSQL it restarts, the proxies of every link, and the jobs the load changes."""

    world: World
    pg: EmbeddedPostgres
    pool: asyncpg.Pool
    jobs: Jobs
    markers: Markers  # one job per trajectory the load never touches: moved to tell when everyone is current
    # "relay-1 → PostgreSQL", "node0 → Redis", "clients → node1"...: every link the gateway's processes have
    proxies: dict[str, FaultProxy] = field(default_factory=dict)
    nodes: dict[int, tuple[int, dict[str, str]]] = field(default_factory=dict)  # slot -> its port, its links

    async def proxy(self, link: str, host: str, port: int = 0) -> FaultProxy:
        proxy = self.proxies[link] = FaultProxy(host, port)
        await proxy.start()
        return proxy

    async def links(self, name: str) -> dict[str, str]:
        """A process's DATABASE_URL and REDIS_URL, each through a proxy of its own."""
        postgres = await self.proxy(f"{name} → PostgreSQL", *postgres_target(self.world.database_url))
        redis = await self.proxy(f"{name} → Redis", "127.0.0.1", self.world.valkey.port)
        return {
            "DATABASE_URL": via_proxy(self.world.database_url, postgres.port),
            "REDIS_URL": f"redis://127.0.0.1:{redis.port}/0",
        }

    async def start_relay(self, name: str) -> Process:
        return self.world.start_relay(name, **await self.links(name))

    async def start_node(self, slot: int, name: str) -> Process:
        """node0 or node1 (again, on its port and its proxies, after a kill); its clients come through a proxy."""
        if slot not in self.nodes:
            env = await self.links(f"node{slot}")
            port = free_port()
            await self.proxy(f"clients → node{slot}", "127.0.0.1", port)
            self.nodes[slot] = (port, env)
        port, env = self.nodes[slot]
        node = self.world.start_node(name, port, **env)
        await asyncio.to_thread(wait_http, node)
        return node

    def client_url(self, slot: int) -> str:
        return f"ws://127.0.0.1:{self.proxies[f'clients → node{slot}'].port}/ws"

    async def mark(self, channels: set[str]) -> dict[str, tuple[str, Any, int]]:
        return await self.markers.mark(channels)

    async def expected(self) -> dict[str, Any]:
        return await self.markers.expected()


async def start_lab(workdir: Path, size: Size) -> Lab:
    pg = EmbeddedPostgres(workdir / "pg")
    database_url = pg.start()
    await migrate(database_url)
    valkey = EmbeddedValkey(workdir / "valkey")
    valkey.start()
    logdir = workdir / "logs"
    logdir.mkdir(exist_ok=True)
    secret = secrets.token_urlsafe(32)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "REDIS_URL": f"redis://127.0.0.1:{valkey.port}/0",
        "GATEWAY_SECRET": secret,
        "GATEWAY_MAX_PENDING_BYTES": str(MAX_PENDING),
        "GATEWAY_LOG_LEVEL": "INFO",
        "GATEWAY_MAX_CONNECTIONS_PER_USER": "1000000",
        "GATEWAY_ADMISSION_SHARE": "1",  # ... so one user may take the whole admission rate
        "GATEWAY_KEEPALIVE": str(KEEPALIVE),
        "GATEWAY_DRAIN_SECONDS": "0",  # no load balancer to leave: a node stopped stops at once
    }  # the subscribers share one user per team
    world = World(database_url, valkey, secret, env, logdir, [])
    pool = await asyncpg.create_pool(
        database_url, min_size=0, max_size=8
    )  # no floor to restore while PostgreSQL restarts
    jobs = await build_world(pool, size.teams, size.trajectories_per_team, size.jobs_per_trajectory)
    lab = Lab(world, pg, pool, jobs, await Markers.add(pool, jobs))
    world.nodes = [await lab.start_node(i, f"node{i}") for i in range(2)]
    await lab.start_relay("relay-1")
    await world.active_relay()
    await lab.start_relay("relay-2")  # standing by
    return lab


async def stop_lab(lab: Lab) -> None:
    await lab.pool.close()
    # From a thread, all at once: the processes reach PostgreSQL and Redis through the proxies of this event loop,
    # and a node's shutdown still talks to them. Waiting for it here froze the proxies until its SIGKILL 10 s later.
    await asyncio.to_thread(processes.stop, [p.proc for p in (*lab.world.nodes, *lab.world.relays)])
    for proxy in lab.proxies.values():
        await proxy.close()
    await asyncio.sleep(0.2)  # the proxies' pipes see their sockets gone and end
    lab.world.valkey.stop()
    lab.pg.stop()


def start_load(lab: Lab, size: Size, seconds: float) -> tuple[Writer, asyncio.Task[None]]:
    """The steady load over every trajectory; a transaction that fails (the database restarting) is skipped."""
    writer = Writer(lab.pool, None, lab.jobs, per_tx=5, concurrency=4, tolerate_errors=True)
    trajectories = [t for team in lab.jobs.teams for t in lab.jobs.trajectories[team]]
    return writer, asyncio.create_task(writer.run(size.rate, seconds, trajectories))


def node_rss_kb(node: Process) -> int:
    return rss_kb([node.proc.pid])


def node_metric(node: Process, name: str) -> float:
    with urllib.request.urlopen(f"{node.http}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise KeyError(name)
