"""One measurement: a system started, its subscribers connected and live, a workload run, figures taken.

Server CPU comes from /proc for the system's processes (the gateway's node and relay together) and is
divided by what the subscribers counted. Memory per connection is the node's RSS with every subscriber
connected and idle, less its RSS before the first one. Every measurement checks correctness too: each
subscriber's final state must equal the database's (in steady and burst, for peers, which send no state there:
the jobs changed while they were connected); a subscriber missing a job is `lost`, one holding an older version
`stale`. Where the peers send each channel's state at connect (`Plan.peer_state`: fanout, storm), a peer's
subscriber is live once it holds it, as the gateway's is once its snapshot has arrived.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.bus.broker import RedisBroker
from gateway.store.outbox import held_open_elsewhere

from .procstat import cpu_seconds, rss_kb
from .report import cdf
from .subscribers import Fleet, FleetStates, compare_states
from .systems import Context, System

DRAIN = 1.0  # quiet this long after the last commit: everything committed has arrived
RELAY_QUIET = 2.0  # the relay's count of changes still this long (two of its heartbeats): it has caught up


@dataclass
class Plan:
    subscribers: int
    channels: Callable[[int], list[str]]  # subscriber i's channels
    team_of_subscriber: Callable[[int], int]  # whose token subscriber i uses (gateway)
    processes: int = 2
    connect_rate: float = 1500.0
    peer_state: bool = False  # the peers send each channel's state at connect (the tap keeps it: Writer.share_state)


@dataclass
class Outcome:
    figures: dict[str, Any]
    curve: list[tuple[float, float]]


def judge(states: FleetStates, expected: dict[str, dict[int, tuple[int, str]]]) -> tuple[int, int, int]:
    """(subscribers checked, lost, stale): per subscriber, a missing job is lost, an older version stale."""
    checked = lost = stale = 0
    for channel, want in expected.items():
        for group in states.groups.get(channel, []):
            checked += group.subscribers
            held = group.state or {}
            if held == want:
                continue
            if any(isinstance(v, int) for v in (*want.values(), *held.values())):  # a team's counts: not the database's
                stale += group.subscribers
            elif any(job not in held for job in want):
                lost += group.subscribers
            elif any(held[job][0] < want[job][0] for job in want):
                stale += group.subscribers
            else:
                lost += group.subscribers  # extra jobs it should not hold count as wrong state too
        lost += states.not_live.get(channel, 0)
    return checked, lost, stale


async def measure(
    system: System,
    ctx: Context,
    plan: Plan,
    token: Callable[[int], str],
    workload: Callable[[Fleet], Awaitable[dict[str, Any] | None]],
    expected: Callable[[bool], Awaitable[dict[str, dict[int, tuple[int, str]]]]],
    progress: Callable[[str], None],
    after: Callable[[Fleet, Callable[[], float], dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
) -> Outcome:
    """Start `system`, connect `plan.subscribers`, run `workload`, take the figures, stop everything.
    `after(fleet, cpu, figures)`, given the subscribers, a reader of the system's CPU seconds and the figures, measures
    more of the same running system (fanout's saturation); what it returns joins the figures."""
    started_at = time.time()
    running = system.start(ctx)
    fleet: Fleet | None = None
    try:
        await asyncio.sleep(0.5)
        rss_before = rss_kb(running.node_pids)
        headers = (
            (lambda i: {"Authorization": f"Bearer {token(plan.team_of_subscriber(i))}"})
            if system.dialect.startswith("gateway")
            else None
        )
        fleet = Fleet(
            f"ws://127.0.0.1:{running.port}{system.path}",
            system.dialect,
            plan.channels,
            plan.subscribers,
            processes=plan.processes,
            headers=headers,
            connect_rate=plan.connect_rate,
            deflate=system.deflate,
            await_state=plan.peer_state and not system.dialect.startswith("gateway"),
        )
        if running.health_port:  # probes and scrapes go where the load balancer's would, not behind the clients
            fleet.http_base = f"http://127.0.0.1:{running.health_port}"
        started, connect_cpu = time.monotonic(), cpu_seconds(running.node_pids)
        await fleet.start()
        live = await fleet.wait_live(60 + plan.subscribers / 100)
        # Connecting as the server pays for it (handshake, token, subscribe, snapshot or state) until the last is live.
        connect_s, connect_cpu = time.monotonic() - started, cpu_seconds(running.node_pids) - connect_cpu
        progress(f"{system.name}: {live['live']}/{plan.subscribers} live in {connect_s:.1f} s")
        await asyncio.sleep(1.0)  # joins are not acknowledged by the peers; let the connect burst settle
        if system.dialect.startswith("gateway"):
            await relay_caught_up(ctx.redis_url, started_at)
        rss_idle = rss_kb(running.node_pids)
        connect_bytes = (await fleet.stats()).get("bytes", 0)  # handshakes, snapshots and states, off the sockets
        await fleet.reset_stats()
        each_before = [cpu_seconds([pid]) for pid in running.server_pids]
        node_before = cpu_seconds(running.node_pids)
        cpu_before, t0 = cpu_seconds(running.server_pids), time.monotonic()
        extra = await workload(fleet) or {}
        await settle(fleet)
        cpu_used, elapsed = cpu_seconds(running.server_pids) - cpu_before, time.monotonic() - t0
        node_used = cpu_seconds(running.node_pids) - node_before
        if system.dialect.startswith("gateway"):  # a quiet second is not the end while the relay is held back
            await relay_caught_up(ctx.redis_url, time.time())
            await settle(fleet)
        blockers = await _held_open_elsewhere(ctx, system, progress)
        each = [round(cpu_seconds([pid]) - before, 3) for pid, before in zip(running.server_pids, each_before)]
        stats = await fleet.stats()
        states = await fleet.states()
        want = await expected(system.dialect.startswith("gateway"))
        checked, lost, stale = judge(states, want)
        if lost or stale:
            for channel, report in compare_states(states, want).items():
                if report["differ"] or report["not_live"]:
                    progress(f"{system.name}: {channel}: {report}")
        latency = stats.get("latency_ms") or {}
        frames, deltas = stats.get("messages", 0), stats.get("deltas", 0)
        figures = {
            "subscribers": plan.subscribers,
            "live": live["live"],
            "cpu_s": round(cpu_used, 3),
            "cpu_s_per_process": each,  # the gateway: node, then relay
            "cpu_us_per_frame": round(cpu_used * 1e6 / frames, 3) if frames else None,
            "cpu_us_per_delta": round(cpu_used * 1e6 / deltas, 3) if deltas else None,
            # The processes that hold the sockets alone: the same as cpu_s for a peer, the gateway's node without
            # its relay (a peer's tap runs in the harness and is counted for nobody).
            "node_cpu_s": round(node_used, 3),
            "node_cpu_us_per_frame": round(node_used * 1e6 / frames, 3) if frames else None,
            "rss_kb_per_conn": round((rss_idle - rss_before) / plan.subscribers, 2),
            "connect_s": round(connect_s, 2),  # until every subscriber was live (the connect rate paces it)
            "connect_cpu_ms_per_sub": round(connect_cpu * 1000 / plan.subscribers, 3),
            # Bytes on the wire per subscriber: connecting (handshake, snapshot or state), then the measured phase.
            "connect_kb_per_sub": round(connect_bytes / 1024 / plan.subscribers, 2),
            "kb_per_sub": round(stats.get("bytes", 0) / 1024 / plan.subscribers, 2),
            "p50_ms": latency.get("p50"),
            "p99_ms": latency.get("p99"),
            "max_ms": latency.get("max"),
            "frames": frames,
            "deltas": deltas,
            "frames_per_s": round(frames / elapsed, 1),
            "deltas_per_s": round(deltas / elapsed, 1),
            "resyncs": stats.get("resyncs", 0),
            "closes": stats.get("closes", {}),
            "gaps": stats.get("gaps", 0),
            "checked": checked,
            "lost": lost,
            "stale": stale,
            "correct": lost == 0 and stale == 0 and checked == _subscriptions(plan, want),
            "held_open_elsewhere": blockers,
            **extra,
        }
        progress(
            f"{system.name}: {frames:,} frames, {deltas:,} deltas, {figures['cpu_us_per_frame']} µs CPU/frame "
            f"({figures['node_cpu_us_per_frame']} the node alone), "
            f"p99 {figures['p99_ms']} ms, {figures['rss_kb_per_conn']} KB/conn, lost {lost}, stale {stale}, "
            f"resynced {figures['resyncs']}"
        )
        if after is not None:
            figures.update(await after(fleet, lambda: cpu_seconds(running.server_pids), figures))
        return Outcome(figures, cdf(stats.get("latency")))
    finally:
        if fleet is not None:
            await fleet.stop()
        running.stop()


async def settle(fleet: Fleet, quiet: float = DRAIN, longest: float = 60.0) -> None:
    """Until the subscribers have received nothing new for `quiet` seconds: what was committed has arrived."""
    deadline = time.monotonic() + longest
    last = -1
    while time.monotonic() < deadline:
        await asyncio.sleep(quiet)
        seen = (await fleet.stats()).get("messages", 0)
        if seen == last:
            return
        last = seen


async def _held_open_elsewhere(ctx: Context, system: System, progress: Callable[[str], None]) -> list[str]:
    """Transactions of other databases on the run's PostgreSQL server, open for over a second as the measure
    ends. The relay reads commit-safely below the server's oldest running transaction, whatever its database:
    one held open elsewhere (another test run on a shared server) holds the gateway's deliveries back, which
    then go out late and coalesced, fewer and larger frames, and its figures are not the workload's. The
    peers' tap does not wait: only the gateway's rounds are checked. BENCH_DATABASE_URL names a server of the
    run's own (bench.infra)."""
    if not system.dialect.startswith("gateway"):
        return []
    try:
        found = await asyncio.wait_for(held_open_elsewhere(ctx.database_url, 1.0), 10)
    except Exception as exc:  # a diagnostic: a server that cannot say is said, not a failed run
        return [f"not checked: {exc!r}"]
    said = [f"{b.database} pid {b.pid}, {b.age_seconds:.0f} s: {b.query[:60]}" for b in found]
    if said:
        progress(f"{system.name}: WARNING: transactions open in other databases held the relay back: {said}")
    return said


def _subscriptions(plan: Plan, checked: dict[str, Any]) -> int:
    return sum(1 for i in range(plan.subscribers) for channel in plan.channels(i) if channel in checked)


async def relay_caught_up(redis_url: str, since: float, timeout: float = 180.0) -> None:
    """Until the gateway's relay, started at `since` (wall clock), has published what the outbox held then: the
    changes written for the systems measured while it was stopped (a peer's burst is 120,000), which it replays
    when it starts. Without this wait the replay's tail fell in the gateway's measured phase (its relay took
    2.7 s in a round of `burst --rounds` against 1.7 s alone). Caught up: its heartbeat is its own (written
    after `since`), nothing holds it back, and its count of changes has not moved for RELAY_QUIET. After a
    measured phase, the same wait (from then) tells a relay held back by another database's transaction from
    one that has published everything (a quiet second alone ended a round early: `stale` in a whole suite)."""
    broker = RedisBroker.connect(redis_url)
    try:
        deadline = time.monotonic() + timeout
        last: int | None = None
        still_since = time.monotonic()
        while time.monotonic() < deadline:
            stats = await broker.relay_stats.read(broker.partitions.tags)
            # Held back (a transaction open elsewhere on the server), the count stands still, and is not caught up.
            if all(s is not None and s.heartbeat >= since and not s.held_back_seconds for s in stats):
                count = sum(s.changes for s in stats if s is not None)
                if count != last:
                    last, still_since = count, time.monotonic()
                elif time.monotonic() - still_since >= RELAY_QUIET:
                    return
            else:
                last = None  # still from the next reading on, not from before it was held
            await asyncio.sleep(0.2)
        raise RuntimeError(f"the gateway's relay did not catch up with the outbox in {timeout:.0f} s")
    finally:
        await broker.aclose()
