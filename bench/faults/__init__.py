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

from collections.abc import Collection
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..subscribers import Fleet
from .judging import phase
from .lab import FULL, KEEPALIVE, MAX_PENDING, QUICK, Progress, start_lab, stop_lab
from .network import NETWORK_FAULTS, NetworkFault, network_phase
from .process import FAULTS
from .report import describe, markdown
from .stall import stalled_clients

__all__ = ["FAULTS", "KEEPALIVE", "MAX_PENDING", "NetworkFault", "markdown", "run"]


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
