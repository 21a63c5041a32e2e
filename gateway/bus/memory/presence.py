"""Who is online, on the memory bus: gateway.bus.presence.PresenceManager's entries, expiring by the clock."""

from __future__ import annotations

from collections.abc import Iterable

from .keyspace import Keyspace


class MemoryPresence:
    def __init__(self, space: Keyspace) -> None:
        self.space = space

    async def join(self, node_id: str, team_id: int, user_id: int, ttl: float) -> None:
        await self.refresh(node_id, [(team_id, user_id)], ttl)

    async def refresh(self, node_id: str, entries: Iterable[tuple[int, int]], ttl: float) -> None:
        self.space.writable()
        expires = self.space.clock() + ttl
        for team_id, user_id in entries:
            self.space.presence.setdefault(team_id, {})[_entry(user_id, node_id)] = expires
            self.space.presence_teams.add(team_id)

    async def leave(self, node_id: str, team_id: int, user_id: int) -> None:
        await self.leave_all(node_id, [(team_id, user_id)])

    async def leave_all(self, node_id: str, entries: Iterable[tuple[int, int]]) -> None:
        self.space.reachable()
        for team_id, user_id in entries:
            team = self.space.presence.get(team_id, {})
            team.pop(_entry(user_id, node_id), None)
            if not team:
                self.space.presence.pop(team_id, None)

    async def online(self, team_id: int, now: float | None = None) -> set[int]:
        self.space.reachable()
        now = self.space.clock() if now is None else now
        team = self.space.presence.get(team_id, {})
        return {int(entry.split(":")[0]) for entry, expires in team.items() if expires >= now}

    async def teams(self) -> list[int]:
        self.space.reachable()
        return list(self.space.presence_teams)

    async def sweep(self, team_ids: list[int], now: float) -> dict[int, set[int]]:
        self.space.reachable()
        out: dict[int, set[int]] = {}
        for team_id in team_ids:
            team = self.space.presence.get(team_id, {})
            for entry in [e for e, expires in team.items() if expires <= now]:
                del team[entry]
            if not team:
                self.space.presence.pop(team_id, None)
            out[team_id] = {int(entry.split(":")[0]) for entry in team}
        return out


def _entry(user_id: int, node_id: str) -> str:
    return f"{user_id}:{node_id}"
