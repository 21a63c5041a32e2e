"""A phase of the faults run: the load, its fault, and every subscriber's state judged against the database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from gateway.bus.broker import RedisBroker
from harness.follower import Follower

from ..load import World as Jobs
from ..load import Writer
from ..measure import judge, settle
from ..subscribers import Fleet, FleetStates, compare_states
from .lab import Lab, Size, start_load


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


def held(f: Follower) -> dict[str, dict[int, tuple[str, int]]]:
    return {c: {i: (j["status"], j["version"]) for i, j in f.listed(c).items()} for c in f.channels}
