"""Redis subscriptions follow local interest: a node is subscribed in the bus to a channel exactly while one
of its connections follows it. One lock per channel orders a subscribe and an unsubscribe that race."""

from __future__ import annotations

import asyncio

from ..bus.broker import Subscribing
from .hub import Hub
from .membership import ChannelTeams


class Interest:
    def __init__(self, hub: Hub, subscriber: Subscribing, teams: ChannelTeams) -> None:
        self.hub = hub
        self.subscriber = subscriber
        self.teams = teams
        self.subscribed: set[str] = set()  # channels subscribed in the bus
        self._locks: dict[str, asyncio.Lock] = {}

    async def reconcile(self, channel: str) -> None:
        """Subscribe or unsubscribe in the bus as the hub's local subscribers say; returns once the bus
        confirmed a subscription (nothing published afterwards can be missed)."""
        lock = self._locks.setdefault(channel, asyncio.Lock())
        tag = self.teams.tag
        async with lock:
            wanted = bool(self.hub.subscribers.get(channel))
            if wanted and channel not in self.subscribed:
                await self.subscriber.subscribe(tag(channel), channel)
                self.subscribed.add(channel)
            elif not wanted and channel in self.subscribed:
                self.subscribed.discard(channel)
                await self.subscriber.unsubscribe(tag(channel), channel)
            elif wanted:
                await self.subscriber.subscribe(tag(channel), channel)  # returns at once when confirmed already
        if not lock.locked() and not self.hub.subscribers.get(channel):
            self._locks.pop(channel, None)
