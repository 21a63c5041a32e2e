"""The relay's side of the bus: publish a cycle's messages with their sequences and state, atomically."""

from __future__ import annotations

from redis.asyncio import Redis

from ..core import envelope
from ..core.protocol import make_cursor, parse_cursor
from ..core.relay import Publication
from . import keys


class Publisher:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def last_seqs(self, channels: list[str]) -> dict[str, int]:
        """The last sequence published on each channel, by any relay before this one (0 when none)."""
        if not channels:
            return {}
        values = await self.redis.mget([keys.seq(c) for c in channels])
        out: dict[str, int] = {}
        for channel, value in zip(channels, values):
            position = parse_cursor(value.decode()) if value is not None else None
            out[channel] = position[1] if position else 0
        return out

    async def publish(self, publications: list[Publication]) -> None:
        """One MULTI/EXEC: a node that reads a channel's state sees it together with its sequence."""
        if not publications:
            return
        pipe = self.redis.pipeline(transaction=True)
        for p in publications:
            pipe.set(keys.seq(p.channel), make_cursor(p.epoch, p.seq))
            if p.state_set is not None:
                pipe.hset(keys.state(p.channel), mapping={**p.state_set, "seq": p.seq, "epoch": p.epoch})
            if p.state_del:
                pipe.hdel(keys.state(p.channel), *p.state_del)
            pipe.publish(keys.pubsub(p.channel), envelope.pack(p.epoch, p.seq, p.json, p.msgpack))
        await pipe.execute()
