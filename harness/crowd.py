"""Many real websocket clients of one node, and the node's own figures about them (its /metrics): for the
test and the benchmark of a node's memory once its clients leave (tests/integration/test_memory_back.py,
`python -m bench memory`)."""

from __future__ import annotations

import asyncio
import json
import random
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

import websockets

CONNECTING_AT_ONCE = 50  # handshakes in flight; a node answers more with 503 busy (retried, as clients do)
FIGURES = (
    "gateway_connections",
    "gateway_subscriptions",
    "gateway_channels",
    "process_resident_memory_bytes",
    "gateway_memory_returns_total",
)


def figures(http: str) -> dict[str, float]:
    """The node's /metrics, those of FIGURES it has."""
    return scrape(http, FIGURES.__contains__)


def scrape(http: str, wanted: Callable[[str], bool]) -> dict[str, float]:
    """The node's /metrics whose names (labels included) are `wanted`."""
    with urllib.request.urlopen(f"{http}/metrics", timeout=30) as response:
        text = response.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if not name.startswith("#") and wanted(name):
            found[name] = float(value)
    return found


@dataclass
class Crowd:
    """`size` clients of `url`, each following `channels` and reading everything the node sends them."""

    url: str
    token: str
    channels: list[str]
    size: int
    received: list[int] = field(default_factory=list)  # messages each client read
    _clients: list[websockets.ClientConnection] = field(default_factory=list)
    _readers: list[asyncio.Task[None]] = field(default_factory=list)

    async def arrive(self, timeout: float = 300.0) -> None:
        gate = asyncio.Semaphore(CONNECTING_AT_ONCE)
        self.received = [0] * self.size
        await asyncio.wait_for(asyncio.gather(*(self._connect(i, gate) for i in range(self.size))), timeout)

    async def leave(self) -> None:
        """Every client closes its websocket, as clients moving to another node do."""
        await asyncio.gather(*(ws.close() for ws in self._clients), return_exceptions=True)
        await asyncio.gather(*self._readers, return_exceptions=True)
        self._clients, self._readers = [], []

    async def _connect(self, i: int, gate: asyncio.Semaphore) -> None:
        """Client `i` connects, reads from then on (a client that does not read stops answering pings), and
        follows the channels."""
        headers = {"Authorization": f"Bearer {self.token}"}
        async with gate:
            while True:
                try:
                    ws = await websockets.connect(
                        self.url, additional_headers=headers, open_timeout=120, ping_interval=None, close_timeout=10
                    )
                    break
                except websockets.InvalidStatus as exc:
                    if exc.response.status_code != 503:
                        raise
                    await asyncio.sleep(0.2 + random.random())  # busy: retry shortly, as the answer says
            self._clients.append(ws)
            self._readers.append(asyncio.create_task(self._read(i, ws)))
            for channel in self.channels:
                await ws.send(json.dumps({"type": "subscribe", "channel": channel}))

    async def _read(self, i: int, ws: websockets.ClientConnection) -> None:
        try:
            async for _ in ws:
                self.received[i] += 1
        except websockets.ConnectionClosed:
            pass
