"""The last phase: a slow client and a stalled one for a minute (the quick size: 40 s) under the load, the others
reading on."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import websockets

from gateway.web.people.auth import issue_token
from harness.follower import Follower

from .. import sql
from ..measure import settle
from ..subscribers import Fleet
from .judging import held, judged
from .lab import (
    MAX_PENDING,
    SLOW_READ_PAUSE,
    SLOW_RECEIVE_BUFFER,
    Lab,
    Progress,
    Size,
    node_metric,
    node_rss_kb,
    start_load,
)


async def stalled_clients(lab: Lab, fleet: Fleet, size: Size, channels: set[str], progress: Progress) -> dict[str, Any]:
    """Two clients on node0 fall behind for `size.stall` seconds under the load: one reads a message every
    SLOW_READ_PAUSE seconds, far slower than its channels move (a slow consumer: it keeps draining its socket,
    in steps shorter than the nodes' keepalive, so the node sees it read and keeps it), one reads and sends nothing at all (a stalled TCP peer). Both follow every job of the first
    teams (team-jobs and trajectory channels: hundreds of KB a second). Meanwhile a marker every 10 s (every 5 s
    in a shorter stall) must reach every other subscriber, and the node's RSS is sampled each second."""
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
        every = 10.0 if size.stall >= 60 else size.stall / 8  # a shorter stall still sees more than five markers
        next_mark = started + every / 2
        while time.monotonic() - started < size.stall:
            await asyncio.sleep(1.0)
            rss.append(node_rss_kb(node))
            if time.monotonic() >= next_mark:
                t0 = time.time()
                at = await fleet.until(await lab.mark(channels), timeout=30)
                delays.append(round(at - t0, 3) if at else None)
                next_mark = time.monotonic() + every
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
        name = f"a client reads slowly, another stops, for {'a minute' if size.stall == 60 else f'{size.stall:g} s'}"
        figures = await judged(lab, fleet, name, writer, None)
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
