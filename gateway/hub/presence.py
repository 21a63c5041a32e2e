"""A node's share of presence: which of its users are online in which teams, kept alive in the bus.

A user with several tabs on this node is one entry; the entry joins with the first open view of the team and
leaves with the last. The node refreshes its entries every `RENEW_EVERY` seconds, so a node that dies stops
and its users drop out within `TTL` seconds (gateway.bus.presence keeps the entries).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter

from ..bus.broker import PresenceStore
from ..bus.errors import BusError

log = logging.getLogger(__name__)

TTL = 8.0  # a dead node's users drop out within this (plus the relay's one-second tick)
RENEW_EVERY = 2.5


class PresenceBoard:
    def __init__(self, presence: PresenceStore, enabled: bool = True) -> None:
        self.presence = presence
        self.enabled = enabled
        self.node_id = uuid.uuid4().hex[:12]
        self._local: Counter[tuple[int, int]] = Counter()  # (team, user) -> open views on this node

    async def add(self, team_id: int, user_id: int) -> None:
        if not self.enabled:
            return
        key = (team_id, user_id)
        self._local[key] += 1
        if self._local[key] == 1:
            await self.presence.join(self.node_id, team_id, user_id, TTL)
            await self._settle(key, online=True)

    async def remove(self, team_id: int, user_id: int) -> None:
        key = (team_id, user_id)
        if not self.enabled or not self._local[key]:
            return
        self._local[key] -= 1
        if not self._local[key]:
            del self._local[key]
            try:
                await self.presence.leave(self.node_id, team_id, user_id)
                await self._settle(key, online=False)
            except BusError:
                pass  # it expires by itself (or the next renewal puts it back)

    async def _settle(self, key: tuple[int, int], online: bool) -> None:
        """A join and a leave of one entry go over pooled connections and may land in either order (a tab that
        reconnects leaves and joins at once): once one has landed, the entry follows the local count again if
        that changed meanwhile, so nobody reads as offline (or online) until the next renewal."""
        while (wanted := bool(self._local.get(key))) != online:
            online = wanted
            team_id, user_id = key
            if wanted:
                await self.presence.join(self.node_id, team_id, user_id, TTL)
            else:
                await self.presence.leave(self.node_id, team_id, user_id)

    async def run(self) -> None:
        """Refresh this node's entries until cancelled."""
        while True:
            await asyncio.sleep(RENEW_EVERY)
            if self._local:
                try:
                    await self.presence.refresh(self.node_id, list(self._local), TTL)
                except BusError as exc:
                    log.warning("presence not renewed: %s", exc)

    async def clear(self) -> None:
        """A node shutting down takes its users out at once."""
        try:
            await self.presence.leave_all(self.node_id, list(self._local))
        except BusError:
            pass
        self._local.clear()
