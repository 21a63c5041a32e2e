"""A TCP proxy whose link misbehaves as networks do, for `bench faults` and the tests: it stalls (half-open:
nothing gets through either way, nothing is closed), adds latency with jitter, is throttled to a rate, and heals.

Why a proxy and not the kernel: here `tc` has no `netem` (no delay, no loss) and there is no packet filter, and
`tc`'s `tbf` or a veth set down would shape a whole interface, not one link between two processes of the same
host. A proxy shapes each link on its own. What it cannot reproduce: in a stall the proxy's kernel still
acknowledges what the sender wrote (up to its buffers), so a sender's TCP_USER_TIMEOUT never fires as it would
on a real dead link; only the application's own keepalive finds it, which is what the gateway relies on.

Each direction of each connection has a reader (stopped while stalled, so that the sender's buffers fill as on a
dead link) and a writer that delivers each chunk when it is due: latency is per chunk, never reordering; the
rate is shared by every connection through the link, each way, as on a real link.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass

from harness.proxy import Proxy

HELD = 4 << 20  # bytes a direction of a connection holds in flight before it stops reading from the sender
PIECE = 4096  # a throttled link sends at most this much at a time, so that its rate is smooth


@dataclass(frozen=True)
class Shape:
    """What the link does to every chunk now (both ways); Shape() is a healthy link."""

    delay: float = 0.0  # seconds added to each chunk
    jitter: float = 0.0  # the delay varies by up to this much either way (uniformly); order is kept
    rate: float | None = None  # bytes a second, each way, over all the link's connections


class FaultProxy(Proxy):
    """A Proxy (cut, restore, stall, flow) that can also delay and throttle its link, and heal it."""

    def __init__(self, target_host: str, target_port: int = 0, seed: int | None = None) -> None:
        super().__init__(target_host, target_port)
        self.shape = Shape()
        self._random = random.Random(seed)
        self._free_at = {False: 0.0, True: 0.0}  # per direction (down?): when a throttled link is next free

    def latency(self, delay: float, jitter: float = 0.0) -> None:
        self.shape = Shape(delay, jitter, self.shape.rate)

    def throttle(self, rate: float) -> None:
        """At most `rate` bytes a second each way."""
        self.shape = Shape(self.shape.delay, self.shape.jitter, rate)

    def heal(self) -> None:
        """A healthy link again: what a stall held is forwarded, in order."""
        self.shape = Shape()
        self.flow()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, down: bool) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
        room = asyncio.Event()
        held = 0
        last_due = 0.0

        async def read() -> None:
            nonlocal held, last_due
            with contextlib.suppress(OSError):
                while True:
                    await self.flowing.wait()
                    data = await src.read(65536)
                    if not data:
                        break
                    shape = self.shape
                    delay = max(0.0, shape.delay + self._random.uniform(-shape.jitter, shape.jitter))
                    last_due = max(last_due, loop.time() + delay)
                    queue.put_nowait((last_due, data))
                    held += len(data)
                    while held > HELD:
                        room.clear()
                        await room.wait()
            queue.put_nowait(None)

        async def write() -> None:
            nonlocal held
            with contextlib.suppress(OSError):
                while (item := await queue.get()) is not None:
                    due, data = item
                    await asyncio.sleep(due - loop.time())
                    await self.flowing.wait()
                    step = PIECE if self.shape.rate else len(data)
                    for piece in (data[at : at + step] for at in range(0, len(data), step)):
                        await self._pace(len(piece), down)
                        await self.flowing.wait()
                        if down:
                            self.downstream += len(piece)
                        dst.write(piece)
                        await dst.drain()
                    held -= len(data)
                    room.set()
                await self.flowing.wait()  # stalled, a close does not get through either
            dst.close()

        reader = asyncio.create_task(read())
        try:
            await write()
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def _pace(self, size: int, down: bool) -> None:
        """Wait for the link's turn to carry `size` bytes, if it is throttled."""
        rate = self.shape.rate
        if rate is None:
            return
        now = asyncio.get_running_loop().time()
        start = max(now, self._free_at[down])
        self._free_at[down] = start + size / rate
        await asyncio.sleep(self._free_at[down] - now)
