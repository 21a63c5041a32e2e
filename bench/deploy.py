"""`python -m bench deploy [--quick] [--subscribers N]`: a rolling deploy of two gateway nodes behind HAProxy,
under the `steady` load.

The world: a fresh database on the machine's PostgreSQL (bench/infra.py), a private Valkey, one relay, two
gateway nodes, and HAProxy from Debian's package in front of them, configured as docs/operations.md ("Rolling
deploys") tells operators to (harness/haproxy.py: health checks on /readyz every 2 s, every second once one
failed, out after 3 failed, back after 2 passed; websockets as tunnels). The nodes drain for GATEWAY_DRAIN_SECONDS = 2 s x 3 = 6 s, their
default. The subscribers (16,000; 300 with --quick), real websockets in worker processes as in `steady`, every
one on its team's channel and a quarter also on a trajectory panel, connect through HAProxy (leastconn spreads
them over both nodes).

Each node in turn, under the load: SIGTERM; its /readyz turns 503 and HAProxy takes it out; after the drain it
closes its websockets with 1012 and a retry hint each; its clients come back through HAProxy to the other node
and resume from their cursors; the process exits (0); it is started again on its port and HAProxy takes it back
once /readyz passes. Per restart: the time from SIGTERM until every subscriber is current (it holds a change
committed once the node had exited: a marker, bench/markers.py), the peak of /healthz latency on the surviving
node (polled directly, not through HAProxy, 20 times a second from a process of its own), and what the
subscribers counted: lost (subscriptions whose state is not the database's once the load stopped), duplicated
and resynced messages, reconnects, the close codes and retry hints they got.

A proxied connection takes two descriptors in HAProxy; where the open-files hard limit does not allow one HAProxy
process all of them (16,000 subscribers here, under a hard limit of 20,000), the subscribers are shared over as
many HAProxy processes with the same configuration as it takes, as an active-active pair of load balancers would
share them. `tests/integration/test_rolling_deploy.py` runs the quick size; this command writes the figures to
bench/results/deploy.json and .md (or --out).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import resource
import secrets
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from gateway.embedded import free_port
from harness.haproxy import FALL, FASTINTER, INTER, RISE, HAProxy, Node
from harness.world import Process, spawn, wait_http

from .healthz import HealthProbe, latency_figures
from .infra import Infra, start_infra
from .load import World as Jobs
from .load import Writer, build_world
from .markers import Markers
from .measure import judge, settle
from .subscribers import Fleet

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

    async def start_node(self, slot: int, name: str) -> Process:
        env = {**self.env, "GATEWAY_HEALTH_PORT": str(self.health_ports[slot])}  # HAProxy checks it there
        node = spawn(name, ["serve", "--port", str(self.ports[slot])], env, self.logdir, self.ports[slot])
        try:
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


async def start_stage(workdir: Path, size: Size, progress: Progress, logdir: Path) -> Stage:
    """Everything up: both nodes UP in every HAProxy. What was started is stopped again if something fails."""
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
    stage = Stage(
        infra, pool, jobs, markers, env, logdir, relay, [free_port(), free_port()], [free_port(), free_port()]
    )
    try:
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


# -- one restart


async def connections(node: Process) -> int | None:
    """The websockets a node holds, as its /healthz says (None: it did not answer within 30 s)."""

    def read() -> int | None:
        try:
            with urllib.request.urlopen(f"{node.http}/healthz", timeout=30) as response:
                return int(json.loads(response.read())["connections"])
        except OSError:
            return None

    return await asyncio.to_thread(read)


async def not_ready_at(node: Process, timeout: float = 60) -> float | None:
    """When the node's /readyz first answered 503 (time.time()), polled every 20 ms; None if it never did."""

    def status() -> int:
        try:
            with urllib.request.urlopen(f"{node.http}/readyz", timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as refused:
            return refused.code
        except OSError:
            return 0  # gone

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = await asyncio.to_thread(status)
        if code == 503:
            return time.time()
        if code == 0:
            return None
        await asyncio.sleep(0.02)
    return None


def start_load(stage: Stage, size: Size) -> tuple[Writer, asyncio.Task[None]]:
    """The steady load over every trajectory until cancelled."""
    writer = Writer(stage.pool, None, stage.jobs, per_tx=5, concurrency=4)
    trajectories = [t for team in stage.jobs.teams for t in stage.jobs.trajectories[team]]
    return writer, asyncio.create_task(writer.run(size.rate, 3600, trajectories))


async def restart(stage: Stage, fleet: Fleet, size: Size, slot: int, channels: set[str]) -> dict[str, Any]:
    node, other = stage.nodes[slot], stage.nodes[1 - slot]
    await fleet.reset_stats()
    writer, load = start_load(stage, size)
    probe = HealthProbe(f"http://127.0.0.1:{stage.health_ports[1 - slot]}")  # where HAProxy checks it
    try:
        await asyncio.sleep(size.before)
        on_node, on_other = await connections(node), await connections(other)
        own_5xx, other_downs = await stage.balancer_figures(1 - slot)
        signalled = time.time()
        node.proc.send_signal(signal.SIGTERM)
        not_ready = asyncio.create_task(not_ready_at(node))
        out = asyncio.create_task(stage.in_rotation(slot, "DOWN"))
        exit_code = await asyncio.to_thread(node.proc.wait, 120)
        exited = time.time()
        # The new version starts at once, as a deploy starts it; HAProxy sends it clients once it is UP.
        starting = asyncio.create_task(stage.start_again(slot))
        current = await fleet.until(await stage.markers.mark(channels), timeout=180)
        again, back = await starting
        readyz_503, lb_down = await not_ready, await out
        await asyncio.sleep(size.after)
        own_5xx_after, other_downs_after = await stage.balancer_figures(1 - slot)
    finally:
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
        samples = await probe.stop()
    await settle(fleet)
    stats = await fleet.stats()
    states = await fleet.states()
    want = await stage.markers.expected()
    checked, lost, stale = judge(states, {c: w for c, w in want.items() if c in states.groups})
    hints = {int(ms): n for ms, n in stats["hints"].items()}
    latency = stats["latency_ms"]

    def since(at: float | None) -> float | None:
        return None if at is None else round(at - signalled, 2)

    return {
        "node": node.name,
        "exit_code": exit_code,
        "clients_on_node": on_node,
        "clients_on_other": on_other,
        "clients_on_other_after": await connections(other),
        "clients_on_restarted_after": await connections(again),
        "readyz_503_s": since(readyz_503),
        "lb_down_s": since(lb_down),
        "exit_s": since(exited),
        "current_s": since(current),
        "current_after_exit_s": None if current is None else round(current - exited, 2),
        "back_in_lb_s": since(back),
        "healthz_before": latency_figures(samples, 0, signalled),
        "healthz": latency_figures(samples, signalled, max(current or exited, back)),
        "checked": checked,
        "lost": lost,
        "stale": stale,
        "duplicates": stats["duplicates"],
        "gaps": stats["gaps"],
        "resyncs": stats["resyncs"],
        "snapshot_pages": stats["snapshot_pages"],
        "reconnects": stats["connects"],
        "closes": stats["closes"],
        "failed_connects": stats["failures"],
        "haproxy_503s": own_5xx_after - own_5xx,  # HAProxy's own: no node UP to send the client to
        "other_taken_out": other_downs_after - other_downs,  # times HAProxy took the surviving node out
        "hints": {
            "count": sum(hints.values()),
            "distinct": len(hints),
            "min_ms": min(hints, default=None),
            "max_ms": max(hints, default=None),
        },
        "p50_ms": latency.get("p50"),
        "p99_ms": latency.get("p99"),
        "max_ms": latency.get("max"),
        "changes": writer.changes,
        "late_commits": writer.late,
    }


async def run(
    workdir: Path, quick: bool, progress: Progress, subscribers: int | None = None, logdir: Path | None = None
) -> dict[str, Any]:
    """Both nodes restarted in turn under the load; the record (`restarts`, one per node). The processes' logs go
    to `logdir` (default: under `workdir`)."""
    size = QUICK if quick else FULL
    if subscribers is not None:
        size = Size(**{**asdict(size), "subscribers": subscribers})
    stage = await start_stage(workdir, size, progress, logdir or workdir / "logs")
    jobs = stage.jobs

    def channels_of(i: int) -> list[str]:  # as in `steady`
        team = jobs.teams[i % size.teams]
        mine = [f"team:{team}"]
        if i % 4 == 0:
            mine.append(f"trajectory:{jobs.trajectories[team][(i // size.teams) % size.trajectories_per_team]}")
        return mine

    channels = {c for i in range(size.subscribers) for c in channels_of(i)}
    secret = stage.env["GATEWAY_SECRET"]
    tokens = {team: jobs.token(secret, team) for team in jobs.teams}
    balancers = [b.ws for b in stage.balancers]
    fleet = Fleet(
        lambda i: balancers[i % len(balancers)],
        "gateway",
        channels_of,
        size.subscribers,
        processes=2,
        headers=lambda i: {"Authorization": f"Bearer {tokens[jobs.teams[i % size.teams]]}"},
        connect_rate=size.connect_rate,
    )
    record: dict[str, Any] = {
        "scenario": "deploy",
        "quick": quick,
        "size": asdict(size),
        "drain_s": DRAIN,
        # The nodes' settings beside the defaults (GATEWAY_ADMISSION_RATE from the environment sets the spread)
        "node_settings": {
            k: v for k, v in sorted(stage.env.items()) if k.startswith("GATEWAY_") and k != "GATEWAY_SECRET"
        },
        "haproxy": {
            "processes": len(stage.balancers),
            "check": f"inter {INTER:g}s fastinter {FASTINTER:g}s fall {FALL} rise {RISE}",
            "config": "",
        },
        "restarts": [],
    }
    record["haproxy"]["config"] = stage.balancers[0].config.read_text()
    try:
        await fleet.start()
        live = await fleet.wait_live(120 + size.subscribers / 100)
        if not live["ok"]:
            raise RuntimeError(f"only {live['live']} of {size.subscribers} subscribers live: {live}")
        progress(
            f"{live['live']:,}/{size.subscribers:,} subscribers live through HAProxy "
            f"(node0 {num(await connections(stage.nodes[0]))}, node1 {num(await connections(stage.nodes[1]))}); "
            f"{size.rate * 5:,.0f} job changes/s"
        )
        for slot in range(2):
            figures = await restart(stage, fleet, size, slot, channels)
            record["restarts"].append(figures)
            progress(describe(figures))
    except Exception as exc:  # what was measured is kept, with what stopped it
        record["error"] = f"{type(exc).__name__}: {exc}"
        progress(f"stopped: {record['error']}")
    finally:
        await fleet.stop()
        await stop_stage(stage)
    return record


def num(value: Any) -> str:
    """A count with thousands separators; "-" for none (a node that did not answer)."""
    return "-" if value is None else f"{value:,}"


def describe(f: dict[str, Any]) -> str:
    h = f["healthz"]
    return (
        f"{f['node']} restarted (exit {f['exit_code']}, {num(f['clients_on_node'])} clients): /readyz 503 after "
        f"{f['readyz_503_s']} s, out of HAProxy after {f['lb_down_s']} s, exited after {f['exit_s']} s, every "
        f"subscriber current after {f['current_s']} s, back in HAProxy after {f['back_in_lb_s']} s; /healthz on the "
        f"other node peak {h['peak_ms']} ms (p99 {h['p99_ms']}, {h['failed']} failed of {h['polls']}); lost "
        f"{f['lost']}, stale {f['stale']} of {f['checked']}, duplicates {f['duplicates']}, resyncs {f['resyncs']}, "
        f"gaps {f['gaps']}, reconnects {f['reconnects']}, closes {f['closes']}, hints {f['hints']}, refused "
        f"{f['failed_connects']}, HAProxy's own 503s {f['haproxy_503s']}, the other node taken out "
        f"{f['other_taken_out']} times; clients after: other node {num(f['clients_on_other_after'])}, restarted "
        f"{num(f['clients_on_restarted_after'])}"
    )


def markdown(record: dict[str, Any]) -> str:
    size = record["size"]
    lines = [
        f"## rolling deploy behind HAProxy: {size['subscribers']:,} subscribers over {size['teams']} teams, "
        f"{size['rate'] * 5:,.0f} job changes a second",
        "",
        f"Two nodes behind {record['haproxy']['processes']} HAProxy process(es) (health checks on /readyz, "
        f"{record['haproxy']['check']}); each node in turn SIGTERMed (drain {record['drain_s']:g} s) and started "
        "again as soon as it had exited. Times are from the SIGTERM; /healthz is the surviving node's, polled "
        "directly 20 times a second from the SIGTERM until every subscriber was current and the restarted node "
        "back in HAProxy. Lost: subscriptions not at the database's state once the load stopped.",
        "",
        "| node | its clients | /readyz 503 (s) | out of HAProxy (s) | exited (s) | every subscriber current (s) "
        "| back in HAProxy (s) | /healthz peak (ms) | /healthz p99 (ms) | lost | duplicated | resynced | gaps "
        "| reconnects | 1012 closes | distinct retry hints (ms) | refused at the handshake |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in record["restarts"]:
        h, hints = f["healthz"], f["hints"]
        refused = sum(f["failed_connects"].values())
        lines.append(
            f"| {f['node']} | {num(f['clients_on_node'])} | {f['readyz_503_s']} | {f['lb_down_s']} | {f['exit_s']} | "
            f"{f['current_s']} | {f['back_in_lb_s']} | {h['peak_ms']} | {h['p99_ms']} | {f['lost']} | "
            f"{f['duplicates']} | {f['resyncs']} | {f['gaps']} | {num(f['reconnects'])} | "
            f"{num(f['closes'].get(1012, 0))} | {num(hints['distinct'])} ({hints['min_ms']}-{hints['max_ms']}) | "
            f"{num(refused)} |"
        )
    settings = ", ".join(f"{k}={v}" for k, v in record.get("node_settings", {}).items())
    before = [f["healthz_before"]["peak_ms"] for f in record["restarts"]]
    lines += [
        "",
        f"/healthz peak on the same node in the {size['before']:g} s before each SIGTERM: {before} ms. "
        f"Exit codes: {[f['exit_code'] for f in record['restarts']]}. Refused at the handshake, by kind: "
        f"{[f['failed_connects'] for f in record['restarts']]}; of them HAProxy's own 503s (no node UP): "
        f"{[f['haproxy_503s'] for f in record['restarts']]}.",
    ]
    lines += ["", f"The nodes' settings: {settings}."]
    if record.get("error"):
        lines += ["", f"The run stopped early: {record['error']}"]
    return "\n".join(lines) + "\n"
