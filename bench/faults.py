"""`python -m bench faults [--quick]`: the `steady` load, and faults injected into it one after another.

One world runs throughout: an embedded PostgreSQL (it is restarted, so never the machine's server), a private
Valkey, two gateway nodes and two relays (one active, one standing by). Every link goes through a fault proxy of
its own (harness/faults.py): each node's and each relay's to PostgreSQL and to Redis, and the subscribers' to
each node, so that one link can be cut, stalled, delayed or throttled while the others stay healthy. Subscribers (real websockets in worker processes, as in
`steady`: every one on its team's channel, a quarter also on a trajectory panel) are spread over both nodes
and move to the other node when theirs is gone, resuming from their cursors.

Each phase runs the load, injects its fault mid-load, keeps the load going, stops it, lets the stream settle
and compares every subscriber's state with the database (`lost`, `stale`: must be 0). Its time to recover is
from the fault until every subscriber holds a change committed just after it (as soon as the database takes
writes again): a marker, one job per trajectory moved to a status the load never writes. The last phase
slows one client to a trickle and stops another from reading for a whole minute under the load (the slow one
still draining its socket and so answering pings, the other a stalled
TCP peer): the node's memory must stay bounded, the others keep receiving, both end at the database's state.

The network faults come after the process faults, one link at a time (node0's, or the active relay's): a
half-open partition (nothing through either way, nothing closed), 200 ms ± 50 ms of latency, 1 Mbit/s; each
healed after its duration. Each reports, besides the above, how long after the heal every subscriber is current
again and the peak RSS of the nodes and of the relays during it.

Only the gateway is measured (no peers). `tests/integration/test_faults_under_load.py` runs the quick size and
asserts what a user would see; this command writes the figures to bench/results/faults.json and .md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import time
import urllib.request
from collections.abc import Awaitable, Callable, Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import websockets

from gateway.bus.broker import RedisBroker
from gateway.embedded import EmbeddedPostgres, EmbeddedValkey, free_port
from gateway.store.migrate import migrate
from gateway.web.auth import issue_token
from harness.faults import FaultProxy
from harness.follower import Follower
from harness.world import Process, World, postgres_target, via_proxy, wait_http

from . import sql
from .load import World as Jobs
from .load import Writer, build_world
from .markers import Markers
from .measure import judge, settle
from .procstat import rss_kb
from .subscribers import Fleet, FleetStates, compare_states

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
# with room to spare on a busy machine: at 12 s, twice in eight runs beside other work, the heal came first.
QUICK = Size(
    teams=5, trajectories_per_team=3, jobs_per_trajectory=60, subscribers=300, rate=100, before=1.5, after=3.5,
    half_open=16, latency=4, throttle=4,
)  # fmt: skip
FULL = Size(teams=20, trajectories_per_team=4, jobs_per_trajectory=100, subscribers=2_000, rate=200, before=3, after=8)
KEEPALIVE = 10.0  # the nodes' GATEWAY_KEEPALIVE: a silent Redis link is dead after 6 s, its clients closed by 10 s
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
    for p in (*lab.world.nodes, *lab.world.relays):
        p.stop()
    for proxy in lab.proxies.values():
        await proxy.close()
    await asyncio.sleep(0.2)  # the proxies' pipes see their sockets gone and end
    lab.world.valkey.stop()
    lab.pg.stop()


# -- the faults: each injects, then (once every subscriber is current again) restores what the next one needs


async def relay_sigkill(lab: Lab) -> Callable[[], Awaitable[None]]:
    active = await lab.world.active_relay()
    active.proc.send_signal(signal.SIGKILL)

    async def restore() -> None:
        await lab.start_relay(f"relay-{len(lab.world.relays) + 1}")  # a standby again

    return restore


async def relay_cut_from_postgres(lab: Lab) -> Callable[[], Awaitable[None]]:
    active = await lab.world.active_relay()
    lab.proxies[f"{active.name} → PostgreSQL"].cut()

    async def restore() -> None:
        lab.proxies[f"{active.name} → PostgreSQL"].restore()  # the network heals: it comes back as a standby
        if active.proc.poll() is not None:
            await lab.start_relay(f"relay-{len(lab.world.relays) + 1}")

    return restore


async def redis_restart(lab: Lab) -> None:
    await asyncio.to_thread(lab.world.valkey.stop)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(lab.world.valkey.start)


async def postgres_restart(lab: Lab) -> None:
    await asyncio.to_thread(lab.pg.stop)  # every connection to it breaks: relays, nodes, the load
    await asyncio.sleep(1.0)
    await asyncio.to_thread(lab.pg.start)


async def node_sigkill(lab: Lab) -> Callable[[], Awaitable[None]]:
    doomed = lab.world.nodes[1]
    doomed.proc.send_signal(signal.SIGKILL)  # its clients reconnect to node0 with their cursors

    async def restore() -> None:
        doomed.proc.wait()
        lab.world.nodes[1] = await lab.start_node(1, f"{doomed.name}-again")

    return restore


async def nothing(lab: Lab) -> None:
    return None


FAULTS: dict[str, Callable[[Lab], Awaitable[Any]]] = {
    "none (baseline)": nothing,
    "relay SIGKILLed": relay_sigkill,
    "relay cut from PostgreSQL": relay_cut_from_postgres,
    "Redis restarted": redis_restart,
    "PostgreSQL restarted": postgres_restart,
    "gateway node SIGKILLed": node_sigkill,
}


# -- network faults: a link misbehaves for a while (through its proxy, harness/faults.py), then heals


@dataclass(frozen=True)
class NetworkFault:
    kind: str  # "half-open", "latency", "throttle"
    link: str  # "node → Redis", ...: node0's, or the relay active when the fault starts

    @property
    def name(self) -> str:
        return f"{NETWORK_KINDS[self.kind]}, {self.link}"

    def duration(self, size: Size) -> float:
        return {"half-open": size.half_open, "latency": size.latency, "throttle": size.throttle}[self.kind]

    def inject(self, proxy: FaultProxy) -> None:
        if self.kind == "half-open":
            proxy.stall()
        elif self.kind == "latency":
            proxy.latency(LATENCY, JITTER)
        else:
            proxy.throttle(THROTTLE)


NETWORK_KINDS = {
    "half-open": "half-open partition (both ways dropped, no FIN or RST)",
    "latency": f"{LATENCY * 1000:.0f} ms latency ± {JITTER * 1000:.0f} ms",
    "throttle": f"throttled to {THROTTLE * 8 / 1e6:g} Mbit/s",
}
LINKS = ("node → Redis", "relay → Redis", "relay → PostgreSQL", "node → PostgreSQL", "client → node")
NETWORK_FAULTS = {f.name: f for f in (NetworkFault(kind, link) for kind in NETWORK_KINDS for link in LINKS)}
# node0 cut off from Redis while node1 serves on: the half-open node → Redis phase, which also checks node1


async def link_proxy(lab: Lab, link: str) -> tuple[str, FaultProxy]:
    """The proxy of `link` now: node0's, or the active relay's; with the process's name."""
    process = (await lab.world.active_relay()).name if link.startswith("relay") else "node0"
    if link == "client → node":
        return process, lab.proxies["clients → node0"]
    return process, lab.proxies[f"{process} → {link.split(' → ')[1]}"]


class Memory:
    """Each node's and relay's RSS, sampled twice a second while a phase runs: the peak of each role."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.before = self._sample()
        self.peak = dict(self.before)
        self._task = asyncio.create_task(self._run())

    def _sample(self) -> dict[str, int]:
        def peak(processes: list[Process]) -> int:
            return max((rss_kb([p.proc.pid]) for p in processes if p.proc.poll() is None), default=0)

        return {"node": peak(self.lab.world.nodes), "relay": peak(self.lab.world.relays)}

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            for role, kb in self._sample().items():
                self.peak[role] = max(self.peak[role], kb)

    async def stop(self) -> dict[str, float]:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        return {
            "node_rss_before_mb": round(self.before["node"] / 1024, 1),
            "node_rss_peak_mb": round(self.peak["node"] / 1024, 1),
            "relay_rss_before_mb": round(self.before["relay"] / 1024, 1),
            "relay_rss_peak_mb": round(self.peak["relay"] / 1024, 1),
        }


async def network_phase(lab: Lab, fleet: Fleet, size: Size, fault: NetworkFault, channels: set[str]) -> dict[str, Any]:
    """The load; the fault on its link for its duration, then healed. `recovery_s`: from the fault until every
    subscriber holds a change committed just after it; `healed_s`: the same from the heal."""
    duration = fault.duration(size)
    await fleet.reset_stats()
    writer, load = start_load(lab, size, size.before + duration + size.after)
    relay_before = (await lab.world.active_relay()).name
    memory = Memory(lab)
    process, proxy = await link_proxy(lab, fault.link)
    witness = await other_node_witness(lab) if fault == NetworkFault("half-open", "node → Redis") else None
    other_node_s = None
    try:
        await asyncio.sleep(size.before)
        started = time.time()
        fault.inject(proxy)
        healing = asyncio.create_task(heal_after(proxy, duration))
        marks = await lab.mark(channels | ({witness[1]} if witness else set()))
        # node1 serves on meanwhile: a client of it holds the change long before node0 is back
        seen = asyncio.create_task(witness_holds(witness, marks, started, duration)) if witness else None
        current_at = await fleet.until(marks, timeout=duration + 90)
        other_node_s = await seen if seen else None
        healed = await healing
        healed_at = await fleet.until(await lab.mark(channels), timeout=90)
        await load
    finally:
        proxy.heal()
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
        if witness is not None:
            await witness[0].__aexit__()
    await settle(fleet)
    figures = await judged(lab, fleet, fault.name, writer, current_at - started if current_at else None)
    # Clients the fault sent to node1 go back to node0 (with their cursors), so that the next phase's link of
    # node0 carries its half of them again.
    moved = await fleet.home()
    figures.update(
        moved_back=moved,
        kind=fault.kind,
        link=fault.link,
        process=process,
        duration_s=duration,
        healed_s=round(healed_at - healed, 2) if healed_at else None,
        other_node_s=other_node_s,
        relay_before=relay_before,
        relay_after=(await lab.world.active_relay()).name,
        **await memory.stop(),
    )
    return figures


async def heal_after(proxy: FaultProxy, seconds: float) -> float:
    await asyncio.sleep(seconds)
    proxy.heal()
    return time.time()


async def other_node_witness(lab: Lab) -> tuple[Follower, str]:
    """A client of node1 (straight to it) following the first trajectory."""
    team = lab.jobs.teams[0]
    channel = f"trajectory:{lab.jobs.trajectories[team][0]}"
    follower = Follower(lab.world.nodes[1].ws, lab.jobs.token(lab.world.secret, team))
    await follower.__aenter__()
    await follower.subscribe(channel)
    await follower.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=30)
    return follower, channel


async def witness_holds(
    witness: tuple[Follower, str], marks: dict[str, tuple[str, Any, int]], started: float, within: float
) -> float | None:
    """Seconds from `started` until the witness held its channel's mark; None if not within `within`."""
    follower, channel = witness
    _, job, version = marks[channel]
    try:
        await follower.wait_for(lambda f: f.listed(channel).get(job, {}).get("version", 0) >= version, timeout=within)
    except AssertionError:
        return None
    return round(time.time() - started, 2)


# -- running them


def start_load(lab: Lab, size: Size, seconds: float) -> tuple[Writer, asyncio.Task[None]]:
    """The steady load over every trajectory; a transaction that fails (the database restarting) is skipped."""
    writer = Writer(lab.pool, None, lab.jobs, per_tx=5, concurrency=4, tolerate_errors=True)
    trajectories = [t for team in lab.jobs.teams for t in lab.jobs.trajectories[team]]
    return writer, asyncio.create_task(writer.run(size.rate, seconds, trajectories))


async def phase(
    lab: Lab, fleet: Fleet, size: Size, name: str, fault: Callable[[Lab], Awaitable[Any]], channels: set[str]
) -> dict[str, Any]:
    await fleet.reset_stats()
    writer, load = start_load(lab, size, size.before + size.after)
    restore = None
    relay_before = (await lab.world.active_relay()).name
    try:
        await asyncio.sleep(size.before)
        started = time.time()
        restore = await fault(lab)
        current_at = await fleet.until(await lab.mark(channels), timeout=90)
        await load
    finally:
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
    if restore is not None:
        await restore()
    await settle(fleet)
    figures = await judged(lab, fleet, name, writer, current_at - started if current_at else None)
    figures.update(relay_before=relay_before, relay_after=(await lab.world.active_relay()).name)
    return figures


async def judged(lab: Lab, fleet: Fleet, name: str, writer: Writer, recovery: float | None) -> dict[str, Any]:
    """A phase's figures: every subscriber's state against the database, and what the subscribers counted."""
    stats = await fleet.stats()
    states = await fleet.states()
    want = await lab.expected()
    want = {c: w for c, w in want.items() if c in states.groups}
    checked, lost, stale = judge(states, want)
    latency = stats["latency_ms"]
    findings = await wrong_subscribers(lab, fleet, states, want) if lost or stale else []
    return {
        "findings": findings, "gap_samples": stats["gap_samples"] if lost or stale else [],
        "duplicate_samples": stats["duplicate_samples"],
        "fault": name, "recovery_s": None if recovery is None else round(recovery, 2), "checked": checked,
        "lost": lost, "stale": stale, "gaps": stats["gaps"], "duplicates": stats["duplicates"], "resyncs": stats["resyncs"],
        "snapshot_pages": stats["snapshot_pages"], "errors": stats["errors"], "closes": stats["closes"], "reconnects": stats["connects"], "p50_ms": latency.get("p50"), "p99_ms": latency.get("p99"),
        "max_ms": latency.get("max"), "changes": writer.changes, "failed_commits": writer.failed,
    }  # fmt: skip


async def wrong_subscribers(lab: Lab, fleet: Fleet, states: FleetStates, want: dict[str, Any]) -> list[dict[str, Any]]:
    """Per channel some subscribers hold another state than the database's: how it differs, where those
    subscribers stand (their node, the cursor they hold) and what the bus holds for the channel (its position
    and, for a team channel, its stored state's seq and counts), so that a failed run says what went wrong."""
    report = compare_states(states, want)
    differ = {c: r for c, r in report.items() if r["differ"] or r["not_live"]}
    if not differ:
        return []
    examples = sorted({i for r in differ.values() for i in r.get("examples", [])})
    where = await fleet.positions(examples)
    broker = RedisBroker.connect(f"redis://127.0.0.1:{lab.world.valkey.port}/0")
    findings = []
    try:
        for channel, r in differ.items():
            tag = broker.partitions.tag(team_of(lab.jobs, channel))
            bus: dict[str, Any] = {"position": await broker.history.position(tag, channel)}
            if channel.startswith("team:"):
                state = await broker.channels.state(tag, channel)
                bus["state"] = {k.decode(): v.decode() for k, v in state.items() if k in (b"seq", b"epoch")}
                bus["state_counts"] = msgspec.msgpack.decode(state[b"counts"]) if b"counts" in state else None
            held = {
                i: {**where[i], "cursor": where[i]["cursors"].get(channel)} for i in r.get("examples", []) if i in where
            }
            for h in held.values():
                h.pop("cursors", None)
            findings.append({"channel": channel, **r, "held_by": held, "bus": bus})
    finally:
        await broker.aclose()
    return findings


def team_of(jobs: Jobs, channel: str) -> int:
    kind, ident = channel.split(":")
    if kind.startswith("team"):
        return int(ident)
    return next(team for team, trajectories in jobs.trajectories.items() if int(ident) in trajectories)


def node_rss_kb(node: Process) -> int:
    return rss_kb([node.proc.pid])


def node_metric(node: Process, name: str) -> float:
    with urllib.request.urlopen(f"{node.http}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise KeyError(name)


async def stalled_clients(lab: Lab, fleet: Fleet, size: Size, channels: set[str], progress: Progress) -> dict[str, Any]:
    """Two clients on node0 fall behind for `size.stall` seconds under the load: one reads a message every
    SLOW_READ_PAUSE seconds, far slower than its channels move (a slow consumer: it keeps draining its socket,
    so it answers the keepalive pings in turn), one reads and sends nothing at all (a stalled TCP peer). Both follow every job of the first
    teams (team-jobs and trajectory channels: hundreds of KB a second). Meanwhile a marker every 10 s must
    reach every other subscriber, and the node's RSS is sampled each second."""
    node = lab.world.nodes[0]
    user = await lab.pool.fetchval(sql.WATCHER)
    teams = lab.jobs.teams[:5]
    for team in teams:
        await lab.pool.execute(sql.NEW_MEMBERSHIP, team, user)
    token = issue_token(lab.world.secret, user, ttl=3600)
    followed = [
        c for team in teams for c in (f"team-jobs:{team}", *(f"trajectory:{t}" for t in lab.jobs.trajectories[team]))
    ]
    slow = Follower(node.ws, token, stallable=True, receive_buffer=SLOW_RECEIVE_BUFFER)
    stalled = Follower(node.ws, token, stallable=True)
    await fleet.reset_stats()
    writer, load = start_load(lab, size, size.stall + 10)
    delays: list[float | None] = []
    try:
        for f in (slow, stalled):
            await f.__aenter__()
            for channel in followed:
                await f.subscribe(channel)
            await f.wait_for(lambda f: all(s.snapshot_done for s in f.channels.values()), timeout=30)
        connections = await asyncio.to_thread(node_metric, node, "gateway_connections")
        reference = asyncio.create_task(bytes_received(node.ws, token, followed, size.stall))
        rss_before = node_rss_kb(node)
        slow.trickle(SLOW_READ_PAUSE)
        slow_read_before = len(slow.messages)
        stalled.stall()
        progress(
            f"a client reads slowly and another stops reading, for {size.stall:.0f} s (node0 RSS {rss_before / 1024:.0f} MiB)"
        )
        rss = [rss_before]
        started = time.monotonic()
        next_mark = started + 5
        while time.monotonic() - started < size.stall:
            await asyncio.sleep(1.0)
            rss.append(node_rss_kb(node))
            if time.monotonic() >= next_mark:
                t0 = time.time()
                at = await fleet.until(await lab.mark(channels), timeout=30)
                delays.append(round(at - t0, 3) if at else None)
                next_mark = time.monotonic() + 10
        reference_bytes = await reference
        for _ in range(50):  # the reference client's close reaches the node
            connections_after = await asyncio.to_thread(node_metric, node, "gateway_connections")
            if connections_after < connections:
                break
            await asyncio.sleep(0.1)
        stall_stats = await fleet.stats()
        slow_read = len(slow.messages) - slow_read_before
        slow.wake()
        stalled.wake()
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
        # The slow one catches up from the channels' history (or resubscribes on `resync` if the history no
        # longer reaches back); the stalled one finds its connection gone and comes back with its cursors.
        with contextlib.suppress(AssertionError):
            await stalled.wait_for(lambda f: f.closed is not None, timeout=30)
        await asyncio.sleep(1.0)  # the slow one has read its backlog
        stalled_close, slow_close = close_code(stalled), close_code(slow)
        catch_ups = await asyncio.to_thread(node_metric, node, "gateway_catch_ups_total")
        for f in (slow, stalled):
            if f.closed is not None:
                await f.reconnect()
        await settle(fleet)
        want = await follower_expected(lab, followed)
        current = []
        for f in (slow, stalled):
            try:
                await f.wait_for(lambda f: held(f) == want, timeout=60)
                current.append(True)
            except AssertionError:
                current.append(False)
        figures = await judged(lab, fleet, "a client reads slowly, another stops, for a minute", writer, None)
        figures.update(
            {
                "stall_s": size.stall,
                "max_pending_bytes": MAX_PENDING,
                "node_rss_before_mb": round(rss_before / 1024, 1),
                "node_rss_max_growth_mb": round((max(rss) - rss_before) / 1024, 1),
                "reading_client_received_mb": round(
                    reference_bytes / 2**20, 1
                ),  # on the same channels, over the minute
                "slow_current": current[0],
                "stalled_current": current[1],
                "node_connections_before": connections,
                "node_connections_after": connections_after,
                "slow_read_during_stall": slow_read,  # messages: at most 20 a second
                "slow_resyncs": sum(s.resyncs for s in slow.channels.values()),
                "slow_close": slow_close,
                "node_catch_ups": catch_ups,
                "stalled_resyncs": sum(s.resyncs for s in stalled.channels.values()),
                "stalled_close": stalled_close,
                "slow_and_stalled_problems": slow.problems + stalled.problems,
                "others_marker_delays_s": delays,
                "others_during_stall": {k: stall_stats[k] for k in ("resyncs", "gaps", "closes")},
                "others_p50_ms": stall_stats["latency_ms"].get("p50"),
                "others_p99_ms": stall_stats["latency_ms"].get("p99"),
            }
        )
        return figures
    finally:
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
        for f in (slow, stalled):
            await f.__aexit__()


def close_code(f: Follower) -> int | None:
    """How the server ended the connection: its close frame's code, 1006 without one (reset), None if open."""
    if f.closed is None:
        return None
    return f.closed.rcvd.code if f.closed.rcvd is not None else 1006


async def bytes_received(url: str, token: str, channels: list[str], seconds: float) -> int:
    """What a client that keeps reading gets on `channels` in `seconds`: what a stalled one would pile up."""
    total = 0
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=2**22) as ws:
        for channel in channels:
            await ws.send(json.dumps({"type": "subscribe", "channel": channel}))
        with contextlib.suppress(asyncio.TimeoutError):
            async with asyncio.timeout(seconds):
                async for message in ws:
                    total += len(message)
    return total


async def follower_expected(lab: Lab, channels: list[str]) -> dict[str, dict[int, tuple[str, int]]]:
    want = {}
    for channel in channels:
        kind, ident = channel.split(":")
        rows = await lab.pool.fetch(sql.listed_jobs(of_team=kind == "team-jobs"), int(ident))
        want[channel] = {r["id"]: (r["status"], r["version"]) for r in rows}
    return want


def held(f: Follower) -> dict[str, dict[int, tuple[str, int]]]:
    return {c: {i: (j["status"], j["version"]) for i, j in f.listed(c).items()} for c in f.channels}


async def run(
    workdir: Path,
    quick: bool,
    progress: Progress,
    network: Collection[str] | None = None,
    process: Collection[str] | None = None,
    stall: bool = True,
) -> dict[str, Any]:
    """The process faults named in `process` in turn (None: all of FAULTS), the network faults named in
    `network` (None: all of NETWORK_FAULTS), then (`stall`) the stalled clients; the record (`phases`, one per
    fault). The processes' logs stay in `workdir`/logs."""
    size = QUICK if quick else FULL
    lab = await start_lab(workdir, size)
    jobs = lab.jobs
    nodes = [lab.client_url(i) for i in range(2)]  # each node's clients come through a proxy of its own

    def channels_of(i: int) -> list[str]:  # as in `steady`
        team = jobs.teams[i % size.teams]
        mine = [f"team:{team}"]
        if i % 4 == 0:
            mine.append(f"trajectory:{jobs.trajectories[team][(i // size.teams) % size.trajectories_per_team]}")
        return mine

    channels = {c for i in range(size.subscribers) for c in channels_of(i)}
    fleet = Fleet(
        lambda i: [nodes[i % 2], nodes[(i + 1) % 2]],
        "gateway",
        channels_of,
        size.subscribers,
        processes=2,
        headers=lambda i: {"Authorization": f"Bearer {jobs.token(lab.world.secret, jobs.teams[i % size.teams])}"},
        connect_rate=1000.0,
    )
    record: dict[str, Any] = {"scenario": "faults", "quick": quick, "size": asdict(size), "phases": []}
    try:
        await fleet.start()
        live = await fleet.wait_live(120)
        progress(f"{live['live']}/{size.subscribers} subscribers live on two nodes; {size.rate * 5:.0f} job changes/s")
        for name, fault in FAULTS.items():
            if process is not None and name not in process:
                continue
            figures = await phase(lab, fleet, size, name, fault, channels)
            record["phases"].append(figures)
            progress(describe(figures))
        for name in NETWORK_FAULTS if network is None else network:
            figures = await network_phase(lab, fleet, size, NETWORK_FAULTS[name], channels)
            record["phases"].append(figures)
            progress(describe(figures))
        if stall:
            figures = await stalled_clients(lab, fleet, size, channels, progress)
            record["phases"].append(figures)
            progress(describe(figures))
    finally:
        await fleet.stop()
        await stop_lab(lab)
    return record


def describe(f: dict[str, Any]) -> str:
    line = (
        f"{f['fault']}: current again after {f['recovery_s']} s, lost {f['lost']}, stale {f['stale']} of {f['checked']}, "
        f"gaps {f['gaps']}, duplicates {f['duplicates']}, resyncs {f['resyncs']}, reconnects {f['reconnects']}, "
        f"p99 {f['p99_ms']} ms, {f['changes']:,} changes ({f['failed_commits']} commits failed)"
    )
    if "kind" in f:
        line += (
            f"; for {f['duration_s']:g} s, current again {f['healed_s']} s after the heal; peak RSS node "
            f"{f['node_rss_peak_mb']} MiB (from {f['node_rss_before_mb']}), relay {f['relay_rss_peak_mb']} MiB "
            f"(from {f['relay_rss_before_mb']}); relay {f['relay_before']} -> {f['relay_after']}"
        )
        if f["other_node_s"] is not None or f["link"] == "node → Redis" and f["kind"] == "half-open":
            line += f"; node1's client held the change after {f['other_node_s']} s"
    if "stall_s" in f:
        line += (
            f"; node0 RSS grew at most {f['node_rss_max_growth_mb']} MiB, slow client: read {f['slow_read_during_stall']}, "
            f"{f['slow_resyncs']} resyncs, "
            f"close {f['slow_close']}; stalled peer: close {f['stalled_close']}; a reading client got {f['reading_client_received_mb']} MiB; "
            f"others' marker delays {f['others_marker_delays_s']} s"
        )
    return line


def dash(value: Any) -> str:
    return "-" if value is None else str(value)


def markdown(record: dict[str, Any]) -> str:
    size = record["size"]
    lines = [
        f"## faults under the steady load: {size['subscribers']:,} subscribers over {size['teams']} teams, "
        f"{size['rate'] * 5:,.0f} job changes a second",
        "",
        "| fault | current again after (s) | lost | stale | subscriptions checked | gaps | duplicates | resyncs | reconnects | p99 (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in record["phases"]:
        if "kind" in f:
            continue
        lines.append(
            f"| {f['fault']} | {f['recovery_s'] if f['recovery_s'] is not None else '-'} | {f['lost']} | {f['stale']} | "
            f"{f['checked']} | {f['gaps']} | {f['duplicates']} | {f['resyncs']} | {f['reconnects']} | {f['p99_ms']} |"
        )
    network = [f for f in record["phases"] if "kind" in f]
    if network:
        lines += [
            "",
            "Network faults on one link each (node0's, or the active relay's), through a fault proxy, then healed "
            "(current: every subscriber holds a change committed just after the fault, or just after the heal):",
            "",
            "| fault | link | duration (s) | lost | stale | duplicates | current after fault (s) | current after heal (s) "
            "| peak node RSS (MiB) | peak relay RSS (MiB) | gaps | resyncs | reconnects | relay |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for f in network:
            relay = (
                f["relay_before"]
                if f["relay_after"] == f["relay_before"]
                else f"{f['relay_before']} → {f['relay_after']}"
            )
            lines.append(
                f"| {NETWORK_KINDS[f['kind']]} | {f['link']} | {f['duration_s']:g} | {f['lost']} | {f['stale']} | "
                f"{f['duplicates']} | {dash(f['recovery_s'])} | {dash(f['healed_s'])} | {f['node_rss_peak_mb']} "
                f"(from {f['node_rss_before_mb']}) | {f['relay_rss_peak_mb']} (from {f['relay_rss_before_mb']}) | "
                f"{f['gaps']} | {f['resyncs']} | {f['reconnects']} | {relay} |"
            )
        witness = [
            f
            for f in network
            if f["other_node_s"] is not None or f["fault"] == NetworkFault("half-open", "node → Redis").name
        ]
        for f in witness:
            lines += [
                "",
                f"While node0 was cut off from Redis, a client of node1 held a change committed then after {dash(f['other_node_s'])} s.",
            ]
    stall = record["phases"][-1]
    lines += [
        "",
        f"For {stall['stall_s']:.0f} s one client read slowly ({stall['slow_read_during_stall']:,} messages, at most 20 a "
        f"second) and another not at all: node RSS grew at most {stall['node_rss_max_growth_mb']} MiB "
        f"(bound {MAX_PENDING >> 20} MiB a connection) while a client reading the same channels received "
        f"{stall['reading_client_received_mb']} MiB; the slow one got {stall['slow_resyncs']} resyncs "
        f"(close: {stall['slow_close']}), the stalled peer was closed ({stall['stalled_close']}); a marker reached every other "
        f"subscriber in {stall['others_marker_delays_s']} s.",
    ]
    return "\n".join(lines) + "\n"
