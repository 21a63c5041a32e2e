"""A simulated cluster's figures look like a farm's: every cluster's Disk climbed to 99 % and stayed there."""

from __future__ import annotations

import random

from gateway.sim.figures import Wander


def test_a_busy_cluster_s_disk_fills_and_frees_and_never_sits_full() -> None:
    for seed in range(5):
        wander = Wander(random.Random(seed))
        disks = [wander.step(busy=4, workers=4)["disk"] for _ in range(20_000)]  # hours of reports, always busy
        assert max(disks) <= 95.0
        late = disks[5_000:]  # long past any start
        assert min(late) < 75.0 and max(late) >= 90.0, seed  # it fills, and it is freed again
        assert sum(d >= 90.0 for d in late) < len(late) / 2, seed  # full for a while, not for good


def test_an_idle_cluster_s_disk_frees_what_it_held() -> None:
    wander = Wander(random.Random(1))
    wander.disk = 80.0
    disks = [wander.step(busy=0, workers=4)["disk"] for _ in range(1_000)]
    assert disks[-1] < 30.0
