"""The process faults: a relay, a node, Redis or PostgreSQL killed, restarted or cut off, mid-load."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from .lab import Lab


async def relay_sigkill(lab: Lab) -> Callable[[], Awaitable[None]]:
    active = await lab.world.active_relay()
    active.proc.send_signal(signal.SIGKILL)

    async def restore() -> None:
        await lab.start_relay(f"relay-{len(lab.world.relays) + 1}")  # a standby again

    return restore


async def relay_cut_from_postgres(lab: Lab) -> Callable[[], Awaitable[None]]:
    active = await lab.world.active_relay()
    lab.proxies[f"{active.name} → PostgreSQL"].cut()

    async def restore() -> None:
        lab.proxies[f"{active.name} → PostgreSQL"].restore()  # the network heals: it comes back as a standby
        if active.proc.poll() is not None:
            await lab.start_relay(f"relay-{len(lab.world.relays) + 1}")

    return restore


async def redis_restart(lab: Lab) -> None:
    await asyncio.to_thread(lab.world.valkey.stop)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(lab.world.valkey.start)


async def postgres_restart(lab: Lab) -> None:
    await asyncio.to_thread(lab.pg.stop)  # every connection to it breaks: relays, nodes, the load
    await asyncio.sleep(1.0)
    await asyncio.to_thread(lab.pg.start)


async def node_sigkill(lab: Lab) -> Callable[[], Awaitable[None]]:
    doomed = lab.world.nodes[1]
    doomed.proc.send_signal(signal.SIGKILL)  # its clients reconnect to node0 with their cursors

    async def restore() -> None:
        doomed.proc.wait()
        lab.world.nodes[1] = await lab.start_node(1, f"{doomed.name}-again")

    return restore


async def nothing(lab: Lab) -> None:
    return None


FAULTS: dict[str, Callable[[Lab], Awaitable[Any]]] = {
    "none (baseline)": nothing,
    "relay SIGKILLed": relay_sigkill,
    "relay cut from PostgreSQL": relay_cut_from_postgres,
    "Redis restarted": redis_restart,
    "PostgreSQL restarted": postgres_restart,
    "gateway node SIGKILLed": node_sigkill,
}
