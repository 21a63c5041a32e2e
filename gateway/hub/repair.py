"""Filling a channel's gaps from its history: the bus drops messages silently (reconnects, slots that move,
output-buffer limits), the hub notices by sequence (`Hub.on_gap`) and this fetches what is missing. A periodic
check against the bus's positions catches what was lost at the tail of a stream, and a channel whose position
the bus lost (Redis restarted) is resynced, as is one followed on a snapshot read before any relay started."""

from __future__ import annotations

import asyncio
import logging

from ..bus.channels import ChannelReads
from ..bus.history import contiguous
from .backlog import Backlog
from .errors import TRANSIENT
from .hub import Hub
from .membership import ChannelTeams
from .tasks import Tasks

log = logging.getLogger(__name__)

POSITION_CHECK_EVERY = 5.0  # the safety net for messages the bus dropped at the tail of a stream
HISTORY_TRIES = (0.5, 1.0, 2.0)  # a history read that failed (a slow or stalled link) is tried again after these


class Repairs:
    def __init__(self, hub: Hub, reads: ChannelReads, teams: ChannelTeams, backlog: Backlog, tasks: Tasks) -> None:
        self.hub = hub
        self.reads = reads
        self.teams = teams
        self.backlog = backlog
        self.tasks = tasks
        # Channels the last periodic check found behind the bus, with the bus's seq then. A link that is slow,
        # not lossy, delivers them before the next check: only a channel still short of that seq is repaired.
        self.behind: dict[str, int] = {}

    def gap(self, channel: str, first: int, last: int) -> None:
        """The hub's `on_gap`: fetch first..last and hand them back (`Hub.repaired`)."""
        self.tasks.spawn(self._repair(channel, first, last))

    async def _repair(self, channel: str, first: int, last: int) -> None:
        found: list[tuple[int, int, bytes]] | None = None
        for retry_after in (*HISTORY_TRIES, None):
            try:
                entries = await self.reads.entries(self.teams.tag(channel), channel, first, last)
                if contiguous(entries, first, last):
                    found = [(e.epoch, e.seq, e.msgpack) for e in entries]
                break  # read: what it holds is the answer
            except TRANSIENT as exc:
                log.warning("history of %s unavailable: %s", channel, type(exc).__name__)
            if retry_after is None or channel not in self.hub.repairing:
                break
            await asyncio.sleep(retry_after)
        self.hub.repaired(channel, found)

    def bus_lost(self) -> None:
        """Messages published while the bus is away are filled in from history once it is back
        (`bus_restored`); the subscriber counts reconnects for /metrics."""

    def bus_restored(self) -> None:
        """Subscribed again after a reconnect: whatever was published meanwhile comes from history."""
        self.backlog.forget()  # unless Redis restarted and lost it: then sequence numbers start again
        self.tasks.spawn(self._check_soon())

    async def _check_soon(self) -> None:
        for delay in (0.0, 0.2, 1.0):
            await asyncio.sleep(delay)
            try:
                await self.check_once(at_once=True)  # the link was down: what was published meanwhile is lost
                return
            except TRANSIENT:
                continue  # the next periodic check tries again

    async def check_positions(self) -> None:
        while True:
            await asyncio.sleep(POSITION_CHECK_EVERY)
            try:
                await self.check_once()
            except TRANSIENT:
                pass

    async def check_once(self, at_once: bool = False) -> None:
        """Compare each channel with the bus's position. A channel behind it is repaired from the history if it
        still is at the next check (`at_once`: now, after a reconnect)."""
        await self._check_provisional()
        hub, behind = self.hub, self.behind
        channels = {c: self.teams.tag(c) for c in hub.subscribers if self.teams.known(c)}
        seen: dict[str, int] = {}
        for channel, at in (await self.reads.positions(channels)).items():
            if channel not in hub.streams:
                continue
            if at is None:
                if hub.delivered_seq(channel) > 0:  # the bus lost this channel's position: Redis restarted
                    self.backlog.forget()
                    hub.resync_channel(channel, "bus_reset")
                continue
            if not hub.behind(channel, *at):
                continue
            before = behind.get(channel)
            if at_once or (before is not None and hub.delivered_seq(channel) < before):
                hub.check_position(channel, *at)
            else:
                seen[channel] = at[1]  # in flight, perhaps: look again next time
        self.behind = seen

    async def _check_provisional(self) -> None:
        """Channels followed on snapshots read before any relay started on their partition (`Hub.anchor`) are
        read again once one has: its own snapshot counted what was committed before it, never sent as deltas."""
        hub, teams = self.hub, self.teams
        if not hub.provisional:
            return
        tags = {teams.tag(c) for c in hub.provisional if teams.known(c)}
        started = {tag for tag in tags if (await self.reads.origin(tag))[1]}
        for channel in [c for c in hub.provisional if teams.known(c) and teams.tag(c) in started]:
            hub.resync_channel(channel, "bus_reset")
