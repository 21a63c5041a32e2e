"""The I/O around a subscription (gateway.core.subscription): do what it asks, feed back what happened. Reads
go to the bus (positions, history) and PostgreSQL (snapshots) through the node's shared reads; frames go to the
connection, paced by its draining.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..bus.channels import ChannelReads
from ..bus.history import Entry
from ..core.channels import Channel
from ..core.envelope import message_frame
from ..core.protocol import Format
from ..core.subscription import (
    Action,
    GoLive,
    ReadBacklog,
    ReadPosition,
    ReadReplay,
    ReadSnapshot,
    Resync,
    Send,
    Subscription,
    WaitDrained,
)
from ..core.wsframe import Frame
from .backlog import Backlog
from .connection import Connection
from .errors import RETRY_AFTER, TRANSIENT
from .membership import ChannelTeams
from .shared import SharedReads
from .snapshots import Anchor, Snapshots

log = logging.getLogger(__name__)

ResyncOne = Callable[[Connection, str, str], None]  # the node's: tell one client to reload a channel
Delivered = Callable[[str], int]  # the hub's: the newest seq its stream of a channel delivered (-1: none)


class Replay:
    """A replay's history entries, framed once per wire format for all the clients that share its read (a JSON
    frame is a transcoding of the MessagePack the history keeps)."""

    __slots__ = ("entries", "_framed")

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self._framed: dict[str, list[tuple[int, int, Frame]]] = {}

    def framed(self, fmt: Format) -> list[tuple[int, int, Frame]]:
        framed = self._framed.get(fmt)
        if framed is None:
            framed = self._framed[fmt] = [(e.epoch, e.seq, message_frame(e.msgpack, fmt)) for e in self.entries]
        return framed


class SubscriptionRunner:
    """Runs a connection's subscriptions to channels: their reads and sends, until each is live or ended."""

    def __init__(
        self,
        reads: ChannelReads,
        teams: ChannelTeams,
        shared: SharedReads,
        backlog: Backlog,
        snapshots: Snapshots,
        anchor: Anchor,
        delivered: Delivered,
        resync: ResyncOne,
    ) -> None:
        self.reads = reads
        self.teams = teams
        self.shared = shared
        self.backlog = backlog
        self.snapshots = snapshots
        self.anchor = anchor
        self.delivered = delivered
        self.resync = resync

    async def run(
        self, conn: Connection, sub: Subscription[Frame], channel: Channel, since: int, retries: int = 0
    ) -> None:
        """Do the subscription's actions until it is live or ended. `since`: when it began holding messages
        (reads that started earlier are not fresh enough); `retries`: history reads tried again on failure."""
        while actions := sub.actions():
            for action in actions:
                if sub.ended and not isinstance(action, Resync):
                    return
                await self._do(conn, sub, action, channel, since, retries)

    async def catch_up(self, conn: Connection, sub: Subscription[Frame], channel: Channel) -> None:
        """A slow consumer's channel lagged (`Connection.lag`): once it has drained, what it missed comes from
        the channel's history, then it is live again."""
        try:
            await self.run(conn, sub, channel, since=0, retries=2)
        except TRANSIENT as exc:
            log.warning("catching up %s: %s, resync", sub.channel, type(exc).__name__)
            if not sub.ended and conn.close_code is None:
                self.resync(conn, sub.channel, "slow_consumer")

    async def _do(
        self,
        conn: Connection,
        sub: Subscription[Frame],
        action: Action[Frame],
        channel: Channel,
        since: int,
        retries: int,
    ) -> None:
        name = sub.channel
        if isinstance(action, Send):
            await conn.send_paced(action.payload)
        elif isinstance(action, WaitDrained):
            await conn.drain()
            delivered = self.delivered(name)
            sub.drained(delivered if delivered >= 0 else None)
        elif isinstance(action, GoLive):
            conn.go_live(sub)
        elif isinstance(action, Resync):
            self.resync(conn, name, action.reason)
        elif isinstance(action, ReadPosition):
            tag = self.teams.tag(name)
            position = await self.shared.read(("position", name), lambda: self.reads.position(tag, name), since)
            if position is not None:
                self.anchor(name, *position, False)  # a position on the bus: a relay has published
            sub.position_read(position)
        elif isinstance(action, ReadReplay):
            replay = await self._replay(name, action.first, action.last)
            sub.replay_read(action.first, action.last, replay.framed(conn.format))
        elif isinstance(action, ReadSnapshot):
            await self._snapshot(conn, sub, channel, since)
        elif isinstance(action, ReadBacklog):
            sub.backlog_read(await self._backlog(conn, name, action.first, action.last, retries))

    async def _snapshot(self, conn: Connection, sub: Subscription[Frame], channel: Channel, since: int) -> None:
        if channel.kind == "team":
            seq, page = await self.snapshots.team(channel, since)
            sub.snapshot_page(page.frame(conn.format))
            await self.run(conn, sub, channel, since)
        else:
            seq, pages = await self.snapshots.jobs(channel, since)
            async for part in pages:
                sub.snapshot_page(part.frame(conn.format))
                await self.run(conn, sub, channel, since)
                await conn.drain()  # a page at a time, as the client reads
                if sub.ended:
                    return
        sub.snapshot_read(seq)

    async def _replay(self, name: str, first: int, last: int) -> Replay:
        """History entries first..last, read once for every client resuming from the same place together."""
        tag = self.teams.tag(name)

        async def read() -> Replay:
            return Replay(await self.reads.entries(tag, name, first, last))

        return await self.shared.read(("entries", name, first, last), read)

    async def _backlog(self, conn: Connection, name: str, first: int, last: int, retries: int) -> list[Frame] | None:
        """Frames from `first` on (see `Backlog.frames`); None when the history no longer holds them."""
        while True:
            try:
                return await self.backlog.frames(name, conn.format, first, last)
            except TRANSIENT as exc:
                if retries == 0:
                    raise
                retries -= 1
                # Often a pooled connection that died with a Redis restart: again, on a fresh one.
                log.info("history of %s: %s, trying again", name, type(exc).__name__)
                await asyncio.sleep(RETRY_AFTER)
