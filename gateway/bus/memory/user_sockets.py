"""How many websockets each user holds in each process, on the memory bus: gateway.bus.user_sockets' records,
lapsing by the clock, judged by the same rule (gateway.core.user_sockets)."""

from __future__ import annotations

from collections.abc import Mapping

from ...core.user_sockets import within_limit
from .keyspace import Keyspace


class MemoryUserSockets:
    def __init__(self, space: Keyspace) -> None:
        self.space = space

    async def claim(self, process: str, user_id: int, count: int, limit: int, ttl: float) -> bool:
        self.space.writable()
        now = self.space.clock()
        records = self.space.user_sockets.setdefault(user_id, {})
        if not within_limit(records, process, count, limit, now):
            return False
        records[process] = (count, now + ttl)
        return True

    async def record(self, process: str, counts: Mapping[int, int], ttl: float) -> None:
        self.space.writable()
        lapses = self.space.clock() + ttl
        for user_id, count in counts.items():
            records = self.space.user_sockets.setdefault(user_id, {})
            if count > 0:
                records[process] = (count, lapses)
            else:
                records.pop(process, None)
                if not records:
                    del self.space.user_sockets[user_id]
