"""Figures on the memory bus: each cluster's latest (gateway.bus.cluster_figures) and each partition's relay
heartbeat (gateway.bus.relay_stats), the latter kept as Redis keeps a hash: bytes, expiring."""

from __future__ import annotations

from dataclasses import asdict

import msgspec

from ...core.team import ClusterFigures
from ..relay_stats import EXPIRE, RelayStats, parse
from .keyspace import Expiring, Keyspace

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(ClusterFigures)


class MemoryFigures:
    def __init__(self, space: Keyspace) -> None:
        self.space = space

    async def report(self, team_id: int, figures: ClusterFigures) -> None:
        self.space.writable()
        self.space.figures.setdefault(team_id, {})[figures.id] = _encoder.encode(figures)
        self.space.figure_teams.add(team_id)

    async def teams(self) -> list[int]:
        self.space.reachable()
        return list(self.space.figure_teams)

    async def read(self, team_ids: list[int]) -> dict[int, list[ClusterFigures]]:
        self.space.reachable()
        return {t: [_decoder.decode(v) for v in self.space.figures.get(t, {}).values()] for t in team_ids}


class MemoryRelayStats:
    def __init__(self, space: Keyspace) -> None:
        self.space = space

    async def write(self, tag: str, figures: RelayStats) -> None:
        self.space.writable()
        kept = self.space.relay_stats.get(tag)
        fields = {name.encode(): _as_redis_keeps(value) for name, value in asdict(figures).items()}
        value = {**kept.value, **fields} if kept is not None and self.space.alive(kept.expires) else fields
        self.space.relay_stats[tag] = Expiring(value, self.space.clock() + EXPIRE)

    async def read(self, tags: list[str]) -> list[RelayStats | None]:
        self.space.reachable()
        out: list[RelayStats | None] = []
        for tag in tags:
            kept = self.space.relay_stats.get(tag)
            out.append(parse(kept.value) if kept is not None and self.space.alive(kept.expires) else None)
        return out


def _as_redis_keeps(value: object) -> bytes:
    """As redis-py sends a value: bytes as they are, numbers by repr, text in UTF-8."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError(f"Redis keeps no {type(value).__name__}")
    return (value if isinstance(value, str) else repr(value)).encode()
