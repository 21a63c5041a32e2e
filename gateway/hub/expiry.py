"""When sessions end: a connection is closed with 4001 once its token expires (the client renews it and connects
again). One task for every connection, looking once a second, instead of a timer per connection: under uvloop
a timer costs about 650 bytes, a tenth of what an idle connection holds otherwise.

Connections wait in buckets by the second their token expires; a connection that ends first leaves its bucket,
so nothing of it is kept until its token would have expired.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from collections.abc import Callable

from .connection import CLOSE_EXPIRED, Connection

TICK = 1.0  # how often expiries are looked at: a session ends at most this late


class Expiries:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock  # a token's expiry is wall-clock time
        self.buckets: dict[int, set[Connection]] = {}  # the second a token expires -> its connections
        self.seconds: list[int] = []  # the buckets' seconds, as a heap

    def add(self, conn: Connection) -> None:
        if math.isinf(conn.expires):
            return
        second = math.ceil(conn.expires)
        bucket = self.buckets.get(second)
        if bucket is None:
            bucket = self.buckets[second] = set()
            heapq.heappush(self.seconds, second)
        bucket.add(conn)

    def discard(self, conn: Connection) -> None:
        if math.isinf(conn.expires):
            return
        bucket = self.buckets.get(math.ceil(conn.expires))
        if bucket is not None:
            bucket.discard(conn)  # an emptied bucket goes when its second comes

    def due(self) -> list[Connection]:
        """The connections whose token has expired by now (each once)."""
        now, expired = self.clock(), list[Connection]()
        while self.seconds and self.seconds[0] <= now:
            expired.extend(self.buckets.pop(heapq.heappop(self.seconds)))
        return expired

    async def run(self) -> None:
        while True:
            for conn in self.due():
                conn.close(CLOSE_EXPIRED)
            await asyncio.sleep(TICK)
