"""Each partition's relay heartbeat and figures in Redis (`keys.relay_stats`): what /readyz on every node judges.

The active relay writes them about once a second; they expire 30 s after the last write, so a partition whose
relay is gone shows no figures at all. (A relay's /metrics figures are its own: gateway.relay.metrics.)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, cast

import msgspec
from redis.asyncio import Redis

from . import keys

EXPIRE = 30  # seconds


@dataclass
class RelayStats:
    epoch: int
    heartbeat: float  # time.time() of the write
    lag_seconds: float  # commit to publish of the newest change, last cycle with changes
    changes: int
    deltas: int
    published: int
    held_back_seconds: float  # how long an open transaction has held the partition back (0: it is not)
    blocker_pid: int  # that transaction's backend (0: none known)
    blocker_xid: int


async def write(redis: Redis, tag: str, stats: RelayStats) -> None:
    """Replace the partition's figures (one round trip)."""
    name = keys.relay_stats(tag)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.hset(name, mapping=cast(dict[Any, Any], asdict(stats)))
        pipe.expire(name, EXPIRE)
        await pipe.execute()


async def read(redis: Redis, tags: list[str]) -> list[RelayStats | None]:
    """Each partition's figures, in the order of `tags` (None where no relay has reported lately)."""
    async with redis.pipeline(transaction=False) as pipe:
        for tag in tags:
            pipe.hgetall(keys.relay_stats(tag))
        return [parse(kept) for kept in cast(list[dict[bytes, bytes]], await pipe.execute())]


def parse(kept: dict[bytes, bytes]) -> RelayStats | None:
    """Figures as Redis keeps them (str(int), repr(float)); a figure an older relay did not write reads as 0."""
    if not kept:
        return None
    figures = {f.name: keys.text(kept.get(f.name.encode(), b"0")) for f in fields(RelayStats)}
    return msgspec.convert(figures, RelayStats, strict=False)  # not strict: numbers from their text
