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
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict
from pathlib import Path
from typing import Any

from harness.haproxy import FALL, FASTINTER, INTER, RISE
from harness.world import Process

from ..healthz import HealthProbe, latency_figures
from ..measure import judge, settle
from ..pinning import pin, split_cpus
from ..subscribers import Fleet
from .report import describe, markdown, num
from .stage import DRAIN, FULL, QUICK, Progress, Size, Stage, start_load, start_stage, stop_stage

__all__ = ["connections", "describe", "markdown", "not_ready_at", "restart", "run"]


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


EXIT_WITHIN = 120.0  # seconds from SIGTERM: the drain (6 s), the closes and the shutdown's steps take about 10


async def exited_by(node: Process, logdir: Path, timeout: float) -> int:
    """The node's exit code once it has exited. One still running after `timeout` s has its threads' stacks
    written to `logdir` (py-spy, where installed: a node that did not exit left nothing else to tell why)."""
    try:
        return await asyncio.to_thread(node.proc.wait, timeout)
    except subprocess.TimeoutExpired:
        stacks = logdir / f"{node.name}-not-exited.txt"
        spy = shutil.which("py-spy")
        if spy is not None:
            dump = await asyncio.to_thread(
                subprocess.run, [spy, "dump", "--pid", str(node.proc.pid)], capture_output=True, text=True
            )
            stacks.write_text(dump.stdout + dump.stderr)
        said = f"; its stacks: {stacks}" if spy is not None else " (install py-spy to see its stacks)"
        raise RuntimeError(f"{node.name} had not exited {timeout:g} s after its SIGTERM{said}") from None


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
        exit_code = await exited_by(node, stage.logdir, EXIT_WITHIN)
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
    # Every subscriber holds a change committed once the load had stopped, so all the load committed has arrived,
    # however long the relay's reads were held back: they wait below the oldest transaction on the server, whatever
    # its database, and the machine's PostgreSQL may be shared with other work (a whole suite once found every
    # subscriber stale after a quiet of 2 s).
    # (Not as long where they never were current: what they hold is judged as it is.)
    caught_up = await fleet.until(await stage.markers.mark(channels), timeout=180 if current else 30)
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
        "caught_up_s": since(caught_up),
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
    workdir: Path,
    quick: bool,
    progress: Progress,
    subscribers: int | None = None,
    logdir: Path | None = None,
    pinned: bool = False,
) -> dict[str, Any]:
    """Both nodes restarted in turn under the load; the record (`restarts`, one per node). The processes' logs go
    to `logdir` (default: under `workdir`). `pinned`: the relay, the nodes and HAProxy on every CPU but the last,
    the subscribers' processes on that one (PostgreSQL, Valkey and this process's writer are left to the system)."""
    size = QUICK if quick else FULL
    if subscribers is not None:
        size = Size(**{**asdict(size), "subscribers": subscribers})
    servers, clients = split_cpus() if pinned else (None, None)
    stage = await start_stage(workdir, size, progress, logdir or workdir / "logs", servers)
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
        "pinned": None if servers is None else {"servers": sorted(servers), "subscribers": sorted(clients or ())},
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
        if clients is not None:
            for pid in fleet.pids:
                pin(pid, clients)
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
