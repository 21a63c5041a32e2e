"""The network faults: one link misbehaves for a while through its proxy (harness/faults.py), then heals."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from harness.faults import FaultProxy
from harness.follower import Follower
from harness.world import Process

from ..measure import settle
from ..procstat import rss_kb
from ..subscribers import Fleet
from .judging import judged
from .lab import JITTER, LATENCY, THROTTLE, Lab, Size, start_load


@dataclass(frozen=True)
class NetworkFault:
    kind: str  # "half-open", "latency", "throttle"
    link: str  # "node → Redis", ...: node0's, or the relay active when the fault starts

    @property
    def name(self) -> str:
        return f"{NETWORK_KINDS[self.kind]}, {self.link}"

    def duration(self, size: Size) -> float:
        return {"half-open": size.half_open, "latency": size.latency, "throttle": size.throttle}[self.kind]

    def inject(self, proxy: FaultProxy) -> None:
        if self.kind == "half-open":
            proxy.stall()
        elif self.kind == "latency":
            proxy.latency(LATENCY, JITTER)
        else:
            proxy.throttle(THROTTLE)


NETWORK_KINDS = {
    "half-open": "half-open partition (both ways dropped, no FIN or RST)",
    "latency": f"{LATENCY * 1000:.0f} ms latency ± {JITTER * 1000:.0f} ms",
    "throttle": f"throttled to {THROTTLE * 8 / 1e6:g} Mbit/s",
}


LINKS = ("node → Redis", "relay → Redis", "relay → PostgreSQL", "node → PostgreSQL", "client → node")


NETWORK_FAULTS = {f.name: f for f in (NetworkFault(kind, link) for kind in NETWORK_KINDS for link in LINKS)}


async def link_proxy(lab: Lab, link: str) -> tuple[str, FaultProxy]:
    """The proxy of `link` now: node0's, or the active relay's; with the process's name."""
    process = (await lab.world.active_relay()).name if link.startswith("relay") else "node0"
    if link == "client → node":
        return process, lab.proxies["clients → node0"]
    return process, lab.proxies[f"{process} → {link.split(' → ')[1]}"]


class Memory:
    """Each node's and relay's RSS, sampled twice a second while a phase runs: the peak of each role."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.before = self._sample()
        self.peak = dict(self.before)
        self._task = asyncio.create_task(self._run())

    def _sample(self) -> dict[str, int]:
        def peak(processes: list[Process]) -> int:
            return max((rss_kb([p.proc.pid]) for p in processes if p.proc.poll() is None), default=0)

        return {"node": peak(self.lab.world.nodes), "relay": peak(self.lab.world.relays)}

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.5)
            for role, kb in self._sample().items():
                self.peak[role] = max(self.peak[role], kb)

    async def stop(self) -> dict[str, float]:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        return {
            "node_rss_before_mb": round(self.before["node"] / 1024, 1),
            "node_rss_peak_mb": round(self.peak["node"] / 1024, 1),
            "relay_rss_before_mb": round(self.before["relay"] / 1024, 1),
            "relay_rss_peak_mb": round(self.peak["relay"] / 1024, 1),
        }


async def network_phase(lab: Lab, fleet: Fleet, size: Size, fault: NetworkFault, channels: set[str]) -> dict[str, Any]:
    """The load; the fault on its link for its duration, then healed. `recovery_s`: from the fault until every
    subscriber holds a change committed just after it; `healed_s`: the same from the heal."""
    duration = fault.duration(size)
    await fleet.reset_stats()
    writer, load = start_load(lab, size, size.before + duration + size.after)
    relay_before = (await lab.world.active_relay()).name
    memory = Memory(lab)
    process, proxy = await link_proxy(lab, fault.link)
    witness = await other_node_witness(lab) if fault == NetworkFault("half-open", "node → Redis") else None
    other_node_s = None
    try:
        await asyncio.sleep(size.before)
        started = time.time()
        fault.inject(proxy)
        healing = asyncio.create_task(heal_after(proxy, duration))
        marks = await lab.mark(channels | ({witness[1]} if witness else set()))
        # node1 serves on meanwhile: a client of it holds the change long before node0 is back
        seen = asyncio.create_task(witness_holds(witness, marks, started, duration)) if witness else None
        current_at = await fleet.until(marks, timeout=duration + 90)
        other_node_s = await seen if seen else None
        healed = await healing
        healed_at = await fleet.until(await lab.mark(channels), timeout=90)
        await load
    finally:
        proxy.heal()
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
        if witness is not None:
            await witness[0].__aexit__()
    await settle(fleet)
    figures = await judged(lab, fleet, fault.name, writer, current_at - started if current_at else None)
    # Clients the fault sent to node1 go back to node0 (with their cursors), so that the next phase's link of
    # node0 carries its half of them again.
    moved = await fleet.home()
    figures.update(
        moved_back=moved,
        kind=fault.kind,
        link=fault.link,
        process=process,
        duration_s=duration,
        healed_s=round(healed_at - healed, 2) if healed_at else None,
        other_node_s=other_node_s,
        relay_before=relay_before,
        relay_after=(await lab.world.active_relay()).name,
        **await memory.stop(),
    )
    return figures


async def heal_after(proxy: FaultProxy, seconds: float) -> float:
    await asyncio.sleep(seconds)
    proxy.heal()
    return time.time()


async def other_node_witness(lab: Lab) -> tuple[Follower, str]:
    """A client of node1 (straight to it) following the first trajectory."""
    team = lab.jobs.teams[0]
    channel = f"trajectory:{lab.jobs.trajectories[team][0]}"
    follower = Follower(lab.world.nodes[1].ws, lab.jobs.token(lab.world.secret, team))
    await follower.__aenter__()
    await follower.subscribe(channel)
    await follower.wait_for(lambda f: f.channels[channel].snapshot_done, timeout=30)
    return follower, channel


async def witness_holds(
    witness: tuple[Follower, str], marks: dict[str, tuple[str, Any, int]], started: float, within: float
) -> float | None:
    """Seconds from `started` until the witness held its channel's mark; None if not within `within`."""
    follower, channel = witness
    _, job, version = marks[channel]
    try:
        await follower.wait_for(lambda f: f.listed(channel).get(job, {}).get("version", 0) >= version, timeout=within)
    except AssertionError:
        return None
    return round(time.time() - started, 2)
