"""The estimated time left, end to end: a simulated cluster works through a steady workload, and the figure the
team channel carried when a quarter was done is checked against how long the rest really took."""

from __future__ import annotations

import time
from typing import Any

import asyncpg

from gateway.sim.cluster import SimCluster
from gateway.sim.workloads import pipeline
from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team

FRAMES = 240  # four workers at 0.8 s a frame on average (0.4 to 1.2 s): about 48 s of work


async def test_the_time_left_at_a_quarter_done_is_within_a_quarter_of_what_the_rest_took(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    cluster = SimCluster(
        stack.nodes[0].http,
        team.cluster_key,
        workers=4,
        fail_rate=0.0,
        speed=0.5,
        seed=34,
        report_metrics=False,
    )
    await cluster.start()
    channel = f"team:{team.id}"
    seen: dict[str, Any] = {}

    def watch(f: Follower) -> bool:
        """Note when a quarter was done (with the figure shown then) and when all was done."""
        s = f.channels[channel].summaries.get(team.trajectory_id)
        if s is None:
            return False
        if "quarter" not in seen and s["completed"] >= FRAMES // 4:
            seen["quarter"] = (time.monotonic(), s.get("eta"), s["completed"])
        if s["completed"] == FRAMES:
            seen["done"] = (time.monotonic(), s.get("eta"))
            return True
        return False

    try:
        async with Follower(stack.nodes[0].ws, team.token) as f:
            await f.subscribe(channel)
            await f.wait_for(lambda f: f.channels[channel].snapshot_done)
            await cluster.submit(
                [
                    {
                        "trajectory_id": team.trajectory_id,
                        "kind": "preprocess",
                        "name": "Preprocess trajectory frame",
                        "frame": n,
                    }
                    for n in range(FRAMES)
                ]
            )
            await f.wait_for(watch, timeout=240)
            rows = [
                r
                for m in f.messages
                if m["type"] == "summary"
                for r in m.get("submissions") or ()
                if r["trajectory_id"] == team.trajectory_id
            ]
        at, eta, completed = seen["quarter"]
        took = seen["done"][0] - at
        print(f"a quarter done ({completed}/{FRAMES}): {eta} s left shown, {took:.1f} s taken")
        assert eta is not None, "no estimate when a quarter was done"
        assert abs(eta - took) <= 0.25 * took, f"{eta} s left shown at {completed}/{FRAMES}, the rest took {took:.1f} s"
        assert seen["done"][1] is None  # nothing left: no figure
        # The upload's submission row carried its figure too, and none once done.
        assert any(r.get("eta") is not None for r in rows) and rows[-1].get("eta") is None
    finally:
        await cluster.stop()


async def test_a_pipeline_run_of_the_demo_at_speed_5_reads_minutes_left_and_ends_when_it_said(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """The demo's own workload (`pipeline`) at `gateway demo --speed 5`: 96 analyses of about 4 s on four workers.
    A quarter done, within its first minute, the team channel carries a figure of a minute or more (read as
    "about N min left"), and the rest takes that long within a quarter (the tolerance docs/jobs-view.md states)."""
    cluster = SimCluster(
        stack.nodes[0].http, team.cluster_key, workers=4, fail_rate=0.0, speed=5, seed=7, report_metrics=False
    )
    await cluster.start()
    channel = f"team:{team.id}"
    seen: dict[str, Any] = {}
    total = 2 * 48 + 2  # two analyses of 48 frames, then their artifact uploads

    def watch(f: Follower) -> bool:
        s = f.channels[channel].summaries.get(team.trajectory_id)
        if s is None:
            return False
        if "shown" not in seen and s["completed"] >= total // 4 and s.get("eta") is not None:
            seen["shown"] = (time.monotonic(), s["eta"], s["completed"])
        return s["completed"] == total

    try:
        async with Follower(stack.nodes[0].ws, team.token) as f:
            await f.subscribe(channel)
            await f.wait_for(lambda f: f.channels[channel].snapshot_done)
            started = time.monotonic()
            await pipeline(
                cluster, team.trajectory_id, 48, ["Polyhedral Template Matching", "Radial Distribution Function"]
            )
            await f.wait_for(watch, timeout=400)
            done = time.monotonic()
        at, eta, completed = seen["shown"]
        took = done - at
        print(f"{completed}/{total} done after {at - started:.1f} s: {eta} s left shown, {took:.1f} s taken")
        assert at - started < 60, "no estimate in the run's first minute"
        assert eta >= 60, f"{eta} s left reads 'less than a minute left'"
        assert abs(eta - took) <= 0.25 * took, f"{eta} s left shown at {completed}/{total}, the rest took {took:.1f} s"
    finally:
        await cluster.stop()
