"""The estimated time left, end to end: a simulated cluster works through a steady workload, and the figure the
team channel carried when a quarter was done is checked against how long the rest really took. The demo's own
pipeline at speed 5 (minutes of work) is run in simulated time through the same estimator by
tests/unit/test_eta_pipeline.py: the path is this test's, the workload's figures that one's."""

from __future__ import annotations

import time
from typing import Any

import asyncpg

from gateway.sim.cluster import SimCluster
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
