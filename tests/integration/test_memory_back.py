"""A node whose clients all leave for another node gives back what they held: its connections, subscriptions
and channels go back to none, and its resident memory comes back near what it was before they came.

The exact figures (before, at the peak, after) are `python -m bench memory`'s; this test holds the user's
path with margins a busy two-core machine keeps: 1,000 real websocket clients following real channels while
changes flow, then every one of them closing.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from harness.crowd import Crowd, figures
from harness.teams import Team
from tests.conftest import Stack, extra_node
from tests.integration.conftest import insert_jobs

CLIENTS = 1_000
DEADLINE = 180.0  # seconds for what the node does once they left: generous, the machine is shared
MIB = 1 << 20
# Near its baseline: what stays after they left is under what 1,000 connections take while open (6-8 KB each:
# docs/scaling.md), 12 KB each with room for a busy machine; bench/ gives the figure (about 5.5 MiB on
# 2026-12-06). Before, every client that left stayed in memory until a full pass of the collector.
KEPT = CLIENTS * 12 * 1024
WAVE_ADDS = 3 * MIB  # a second wave reuses what the first left: it adds at most this much (noise)


async def until(node_http: str, check, what: str, timeout: float = DEADLINE) -> dict[str, float]:
    """The node's figures once `check(figures)` holds; fails naming `what` and the last figures."""
    deadline = time.monotonic() + timeout
    while True:
        found = await asyncio.to_thread(figures, node_http)
        if check(found):
            return found
        assert time.monotonic() < deadline, f"still waiting for {what} after {timeout:g} s: {found}"
        await asyncio.sleep(0.5)


async def changes(pool: asyncpg.Pool, team: Team, stop: asyncio.Event) -> None:
    """A few new jobs a second on the channels the clients follow, until told to stop."""
    while not stop.is_set():
        await insert_jobs(pool, team, 3)
        await asyncio.sleep(0.2)


async def wave(node_http: str, crowd: Crowd, pool: asyncpg.Pool, team: Team) -> dict[str, float]:
    """The crowd arrives, follows its channels while changes flow, and leaves; the node's figures once it
    holds none of them any more."""
    stop = asyncio.Event()
    writer = asyncio.create_task(changes(pool, team, stop))
    try:
        await crowd.arrive()
        await until(
            node_http,
            lambda f: f["gateway_subscriptions"] == 2 * CLIENTS and min(crowd.received) >= 3,
            "every client to follow its channels and receive changes",
        )
        await crowd.leave()
    finally:
        stop.set()
        await writer
    return await until(
        node_http,
        lambda f: f["gateway_connections"] == 0 and f["gateway_subscriptions"] == 0 and f["gateway_channels"] == 0,
        "the node to hold no connection, subscription or channel",
    )


async def test_a_node_gives_back_what_a_thousand_leaving_clients_held(
    stack: Stack, pool: asyncpg.Pool, team: Team, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = {"GATEWAY_MAX_CONNECTIONS_PER_USER": str(2 * CLIENTS), "GATEWAY_ADMISSION_SHARE": "1"}
    with extra_node(stack, "memory-back", tmp_path_factory, **settings) as node:
        channels = [f"team:{team.id}", f"trajectory:{team.trajectory_id}"]
        # What any node makes once, whoever connects (pools, caches, code run for the first time), is made first.
        first = Crowd(node.ws, team.token, channels, 1)
        await first.arrive()
        await first.leave()
        before = await until(node.http, lambda f: f["gateway_connections"] == 0, "the first client to be gone")
        baseline = before["process_resident_memory_bytes"]

        await wave(node.http, Crowd(node.ws, team.token, channels, CLIENTS), pool, team)
        after = await until(
            node.http,
            lambda f: f["process_resident_memory_bytes"] - baseline <= KEPT and f["gateway_memory_returns_total"] >= 1,
            f"RSS back within {KEPT / MIB:.1f} MiB of its {baseline / MIB:.1f} MiB, memory given back",
        )
        await wave(node.http, Crowd(node.ws, team.token, channels, CLIENTS), pool, team)
        await until(
            node.http,
            lambda f: f["process_resident_memory_bytes"] - after["process_resident_memory_bytes"] <= WAVE_ADDS,
            f"RSS after a second wave within {WAVE_ADDS / MIB:g} MiB of the first's "
            f"{after['process_resident_memory_bytes'] / MIB:.1f} MiB",
        )
