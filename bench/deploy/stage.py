"""The rolling deploy's stage: its sizes, HAProxy in front of two nodes, a relay and the load."""

from __future__ import annotations

import asyncio
import math
import os
import resource
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg

from gateway.embedded import free_port
from harness.haproxy import FALL, INTER, HAProxy, Node
from harness.world import Process, spawn, wait_http

from ..infra import Infra, start_infra
from ..load import World as Jobs
from ..load import Writer, build_world
from ..markers import Markers
from ..pinning import pin

Progress = Callable[[str], None]


DRAIN = INTER * FALL  # GATEWAY_DRAIN_SECONDS: HAProxy's check interval x its fall count (the node's default)


HOST = "localhost"  # the name HAProxy's health check asks for (GATEWAY_HOSTS: the default list holds it)


SPARE_FDS = 500  # an HAProxy process's descriptors besides its connections' (listeners, checks, the runtime API)


@dataclass
class Size:
    teams: int
    trajectories_per_team: int
    jobs_per_trajectory: int
    subscribers: int
    rate: float  # commits a second, 5 job changes each
    before: float  # seconds of load before the SIGTERM
    after: float  # seconds of load once the restarted node is back in HAProxy
    connect_rate: float = 1000.0  # new subscribers a second at the start


QUICK = Size(teams=5, trajectories_per_team=3, jobs_per_trajectory=60, subscribers=300, rate=40, before=2, after=2)


# `steady`'s full size: 50 teams of 4 trajectories of 100 jobs, 400 commits of 5 changes a second.
FULL = Size(teams=50, trajectories_per_team=4, jobs_per_trajectory=100, subscribers=16_000, rate=400, before=5, after=5)


@dataclass
class Stage:
    """What runs: the infrastructure, the relay, the two nodes (each on a port of its own for good), the HAProxy
    processes, the jobs the load changes and their markers."""

    infra: Infra
    pool: asyncpg.Pool
    jobs: Jobs
    markers: Markers
    env: dict[str, str]
    logdir: Path
    relay: Process
    ports: list[int]
    health_ports: list[int]  # each node's GATEWAY_HEALTH_PORT: HAProxy's checks and the /healthz probe go there
    nodes: list[Process] = field(default_factory=list)
    balancers: list[HAProxy] = field(default_factory=list)
    cpus: set[int] | None = None  # the CPUs the relay, the nodes and HAProxy are pinned to (None: not pinned)

    def pinned(self, pid: int) -> None:
        """A process of the servers' on their CPUs, when the run pins them."""
        if self.cpus is not None:
            pin(pid, self.cpus)

    async def start_node(self, slot: int, name: str) -> Process:
        env = {**self.env, "GATEWAY_HEALTH_PORT": str(self.health_ports[slot])}  # HAProxy checks it there
        node = spawn(name, ["serve", "--port", str(self.ports[slot])], env, self.logdir, self.ports[slot])
        try:
            self.pinned(node.proc.pid)
            await asyncio.to_thread(wait_http, node)
        except BaseException:
            node.stop()
            raise
        return node

    async def start_again(self, slot: int) -> tuple[Process, float]:
        """Node `slot` started again on its port; when every HAProxy first had it UP (time.time())."""
        node = self.nodes[slot] = await self.start_node(slot, f"node{slot}-again")
        return node, await self.in_rotation(slot, "UP")

    async def balancer_figures(self, slot: int) -> tuple[int, int]:
        """Over every HAProxy: the 5xx it answered itself, and how many times it took node `slot` out."""
        own, downs = 0, 0
        for balancer in self.balancers:
            own += await asyncio.to_thread(balancer.own_5xx)
            downs += int((await asyncio.to_thread(balancer.servers))[f"node{slot}"]["chkdown"] or 0)
        return own, downs

    async def in_rotation(self, slot: int, status: str, timeout: float = 120) -> float:
        """Until every HAProxy holds node `slot` at `status` ("UP", "DOWN"); when the last one did."""
        name = f"node{slot}"
        return max(await asyncio.gather(*(b.until_status(name, status, timeout) for b in self.balancers)))


def balancers_needed(subscribers: int) -> int:
    """HAProxy processes the subscribers need: each proxied connection takes two descriptors, and one process
    gets no more than the open-files hard limit."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    per_process = (1 << 20 if hard == resource.RLIM_INFINITY else hard) - SPARE_FDS
    return max(1, math.ceil(2 * subscribers / per_process))


async def start_stage(
    workdir: Path, size: Size, progress: Progress, logdir: Path, cpus: set[int] | None = None
) -> Stage:
    """Everything up: both nodes UP in every HAProxy, pinned to `cpus` if given. What was started is stopped again
    if something fails."""
    infra = await start_infra(workdir)
    pool = await asyncpg.create_pool(infra.database_url, min_size=2, max_size=8)
    try:
        jobs = await build_world(pool, size.teams, size.trajectories_per_team, size.jobs_per_trajectory)
        markers = await Markers.add(pool, jobs)
    except BaseException:
        await pool.close()
        await infra.close()
        raise
    logdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "DATABASE_URL": infra.database_url,
        "REDIS_URL": infra.redis_url,
        "GATEWAY_SECRET": secrets.token_urlsafe(32),
        "GATEWAY_MAX_CONNECTIONS_PER_USER": "1000000",  # the subscribers share one user per team
        "GATEWAY_ADMISSION_SHARE": "1",  # ... so one user may take the whole admission rate
        # Not a line per websocket unless asked for (BENCH_GATEWAY_LOG_LEVEL=info, as for the other scenarios)
        "GATEWAY_LOG_LEVEL": os.environ.get(
            "BENCH_GATEWAY_LOG_LEVEL", "WARNING" if size.subscribers > 2_000 else "INFO"
        ),
        "GATEWAY_DRAIN_SECONDS": f"{DRAIN:g}",
    }
    env.pop("GATEWAY_RESTART_SPREAD_SECONDS", None)  # the node's defaults, as deployed
    # The relay logs little, and says "relay active" at INFO.
    relay = spawn("relay", ["relay"], {**env, "GATEWAY_LOG_LEVEL": "INFO"}, logdir)
    ports, health_ports = [free_port(), free_port()], [free_port(), free_port()]
    stage = Stage(infra, pool, jobs, markers, env, logdir, relay, ports, health_ports, cpus=cpus)
    try:
        stage.pinned(relay.proc.pid)
        for slot in range(2):
            stage.nodes.append(await stage.start_node(slot, f"node{slot}"))
        await relay_active(relay)
        count = balancers_needed(size.subscribers)
        each = math.ceil(size.subscribers / count)
        targets = [
            Node(f"node{slot}", f"127.0.0.1:{port}", stage.health_ports[slot]) for slot, port in enumerate(stage.ports)
        ]
        for i in range(count):
            balancer = HAProxy(workdir, f"haproxy{i}", free_port(), targets, each + 100, HOST)
            stage.balancers.append(balancer)
            await asyncio.to_thread(balancer.start)
            if balancer.proc is not None:
                stage.pinned(balancer.proc.pid)
        for slot in range(2):
            await stage.in_rotation(slot, "UP")
    except BaseException:
        await stop_stage(stage)
        raise
    progress(
        f"{count} HAProxy process{'es' if count > 1 else ''} (maxconn {each + 100:,} each) in front of node0 and "
        f"node1, both UP; the nodes drain for {DRAIN:g} s"
    )
    return stage


async def relay_active(relay: Process, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while "relay active" not in relay.output():
        if relay.proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the relay did not become active:\n{relay.output()[-2000:]}")
        await asyncio.sleep(0.1)


async def stop_stage(stage: Stage) -> None:
    for balancer in stage.balancers:
        balancer.stop()
    for node in stage.nodes:
        if node.proc.poll() is None:
            node.proc.send_signal(signal.SIGINT)  # at once: no drain at the end of the run
    for process in (*stage.nodes, stage.relay):
        process.stop()
    await stage.pool.close()
    await stage.infra.close()


def start_load(stage: Stage, size: Size) -> tuple[Writer, asyncio.Task[None]]:
    """The steady load over every trajectory until cancelled."""
    writer = Writer(stage.pool, None, stage.jobs, per_tx=5, concurrency=4)
    trajectories = [t for team in stage.jobs.teams for t in stage.jobs.trajectories[team]]
    return writer, asyncio.create_task(writer.run(size.rate, 3600, trajectories))
