"""Reading the memory bus back as a node does: channels' positions and histories, a light channel's state and
its partition's fence."""

from __future__ import annotations

from ..history import Entry
from .keyspace import Keyspace, Position


class MemoryHistory:
    def __init__(self, space: Keyspace) -> None:
        self.space = space

    async def position(self, tag: str, channel: str) -> Position | None:
        self.space.reachable()
        return self.space.positions.get((tag, channel))

    async def positions(self, channels: dict[str, str]) -> dict[str, Position | None]:
        self.space.reachable()
        return {c: self.space.positions.get((tag, c)) for c, tag in channels.items()}

    async def entries(self, tag: str, channel: str, first: int, last: int | None = None) -> list[Entry]:
        self.space.reachable()
        stream = self.space.stream((tag, channel))
        if stream is None:
            return []
        return [e for e in stream.entries if first <= e.seq and (last is None or e.seq <= last)]


class MemoryChannels:
    def __init__(self, space: Keyspace) -> None:
        self.space = space

    async def state(self, tag: str, channel: str) -> dict[bytes, bytes]:
        self.space.reachable()
        return dict(self.space.states.get((tag, channel), {}))

    async def state_fields(self, tag: str, channel: str, names: list[bytes]) -> list[bytes | None]:
        self.space.reachable()
        state = self.space.states.get((tag, channel), {})
        return [state.get(name) for name in names]

    async def fence(self, tag: str) -> int:
        self.space.reachable()
        return self.space.fences.get(tag, 0)

    async def fence_exists(self, tag: str) -> bool:
        self.space.reachable()
        return tag in self.space.fences

    async def origin(self, tag: str) -> tuple[int, bool]:
        self.space.reachable()
        return self.space.fences.get(tag, 0), tag in self.space.cursors
