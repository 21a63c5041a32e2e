"""Read a channel's position and recent history back from Redis (the relay writes both)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis

from ..core.protocol import parse_cursor
from . import keys
from .connection import Bus


@dataclass(frozen=True)
class Entry:
    epoch: int
    seq: int
    msgpack: bytes


async def position(redis: Redis, tag: str, channel: str) -> tuple[int, int] | None:
    """(epoch, seq) of the channel's last message, or None when the bus knows nothing of it."""
    value = await redis.get(keys.seq(tag, channel))
    return parse_cursor(keys.text(value)) if value is not None else None


async def positions(bus: Bus, channels: dict[str, str]) -> dict[str, tuple[int, int] | None]:
    """Positions of channels given with their tags."""
    names = list(channels)
    values = await bus.mget([keys.seq(channels[c], c) for c in names])
    return {c: parse_cursor(keys.text(v)) if v is not None else None for c, v in zip(names, values)}


async def entries(bus: Bus, tag: str, channel: str, first: int, last: int | None = None) -> list[Entry]:
    """The channel's messages with sequence first..last (inclusive; last None: up to the newest)."""
    raw = cast(
        list[tuple[bytes, dict[bytes, bytes]]],
        await bus.redis.xrange(keys.history(tag, channel), f"{first}-0", f"{last}-0" if last is not None else "+"),
    )
    return [Entry(int(fields[b"e"]), int(ident.split(b"-")[0]), fields[b"m"]) for ident, fields in raw]


def contiguous(found: list[Entry], first: int, last: int) -> bool:
    """Whether `found` holds exactly the messages first..last."""
    return len(found) == last - first + 1 and all(e.seq == first + i for i, e in enumerate(found))
