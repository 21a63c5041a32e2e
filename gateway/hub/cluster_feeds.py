"""Clusters' command feeds: `cluster:<id>`, which only that cluster's key may follow.

A cluster holds nothing but the gateway's URL and its key: it opens a websocket with its key and subscribes to
its own channel. The node hears the cluster's commands on the bus (gateway.bus.commands' inbox, subscribed while
the cluster has a feed here: a command sent to a cluster whose feed no node holds reaches nobody, which the
sender sees at once) and writes each to the cluster's connections here.

Subscribing never races a command: the node listens on the bus first, holds what arrives, reads the commands
kept in PostgreSQL (every one not yet confirmed nor expired, and the cluster's position), sends them as the
channel's snapshot, then releases the held commands past that position. A resume (a cursor) gets the snapshot
too: a command not yet confirmed is sent again, and a cluster acts on an id once. A command that does not fit
within the connection's bound resyncs the channel (the cluster subscribes again and finds it in the snapshot);
a bus link that breaks resyncs every feed that listened on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import msgspec

from ..bus.broker import Commands
from ..bus.errors import BusError
from ..core.batching import MAX_BATCH_BYTES
from ..core.channels import cluster as cluster_channel
from ..core.outbound import Verdict
from ..core.protocol import COMMAND_EPOCH, Command, Error, Resync, Snapshot, json_encoder, make_cursor
from ..core.wsframe import PRIVATE_LEVEL, Frame
from .connection import Connection
from .errors import TRANSIENT
from .snapshots import now_ms

log = logging.getLogger(__name__)

LISTEN_TIMEOUT = 5.0  # seconds the bus may take to confirm the node listens for a cluster's commands
MAX_PENDING = 1_000  # commands a snapshot lists at most (the oldest first): more wait for those to be confirmed

_UNAVAILABLE: tuple[type[Exception], ...] = (*TRANSIENT, TimeoutError)
PendingReader = Callable[[int, int], Awaitable[tuple[int, list[Command]]]]

_command = msgspec.json.Decoder(Command)


@dataclass
class Feed:
    """One cluster's feed on this node: its connections with the position each has reached (None while its
    snapshot is read, the commands that arrive meanwhile held), and the bus listener."""

    cluster_id: int
    positions: dict[Connection, int | None] = field(default_factory=dict)
    held: dict[Connection, list[Command]] = field(default_factory=dict)
    listening: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class ClusterFeeds:
    def __init__(self, commands: Commands, pending: PendingReader) -> None:
        self.commands = commands
        self.pending = pending
        self.feeds: dict[int, Feed] = {}
        self.delivered = 0  # commands written to a cluster's connection (for /metrics and tests)
        self.resyncs = 0  # feeds told to subscribe again (gateway_resyncs_total)

    async def subscribe(self, conn: Connection, cluster_id: int) -> None:
        """Send the connection its cluster's pending commands, then each new one as it is sent."""
        name = cluster_channel(cluster_id)
        feed = self._feed(cluster_id)
        feed.positions[conn] = None
        feed.held[conn] = []
        try:
            async with asyncio.timeout(LISTEN_TIMEOUT):
                await feed.listening.wait()
            seq, commands = await self.pending(cluster_id, MAX_PENDING)
        except _UNAVAILABLE as exc:
            log.warning("cluster feed %s: %s", name, type(exc).__name__)
            self.remove(conn, cluster_id)
            conn.tell(Error(code="unavailable", message="the channel is unavailable, try again", channel=name))
            return
        if conn not in feed.positions:
            return  # it left (or was resynced) meanwhile
        for page in _pages(name, seq, commands):
            await conn.send_paced(conn.framed(page))
        held = feed.held.pop(conn, [])
        feed.positions[conn] = seq
        for command in held:
            self._deliver(feed, conn, command)

    def remove(self, conn: Connection, cluster_id: int) -> None:
        """The connection leaves its cluster's feed; the last one to leave stops the node's listening."""
        feed = self.feeds.get(cluster_id)
        if feed is None:
            return
        feed.positions.pop(conn, None)
        feed.held.pop(conn, None)
        if not feed.positions:
            del self.feeds[cluster_id]
            if feed.task is not None:
                feed.task.cancel()

    def follows(self, conn: Connection, cluster_id: int) -> bool:
        feed = self.feeds.get(cluster_id)
        return feed is not None and conn in feed.positions

    async def stop(self) -> None:
        tasks = [f.task for f in self.feeds.values() if f.task is not None]
        self.feeds.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _feed(self, cluster_id: int) -> Feed:
        feed = self.feeds.get(cluster_id)
        if feed is None or feed.task is None or feed.task.done():
            feed = feed or Feed(cluster_id)
            self.feeds[cluster_id] = feed
            feed.listening.clear()
            feed.task = asyncio.create_task(self._listen(feed), name=f"cluster-feed-{cluster_id}")
        return feed

    async def _listen(self, feed: Feed) -> None:
        try:
            async with self.commands.inbox(feed.cluster_id) as inbox:
                feed.listening.set()
                async for data in inbox:
                    try:
                        command = _command.decode(data)
                    except msgspec.DecodeError:  # the gateway's own message: a bug, said and skipped
                        log.warning("cluster feed %d: skipped an undecodable command", feed.cluster_id)
                        continue
                    for conn in list(feed.positions):
                        self._deliver(feed, conn, command)
        except BusError as exc:
            log.warning("cluster feed %d: the bus failed (%s): resyncing it", feed.cluster_id, type(exc).__name__)
        # Whatever ended the listening, commands may be missed from now on: each connection loads the feed again.
        if self.feeds.get(feed.cluster_id) is feed:
            for conn in list(feed.positions):
                self._resync(feed, conn, "bus_lost")

    def _deliver(self, feed: Feed, conn: Connection, command: Command) -> None:
        position = feed.positions.get(conn)
        if position is None:
            held = feed.held.get(conn)
            if held is not None:
                held.append(command)  # behind the snapshot being read
            return
        if command.seq <= position:
            return  # the snapshot listed it already
        feed.positions[conn] = command.seq
        self.delivered += 1
        if conn.push(conn.framed(command) if conn.format != "json" else _json_frame(command)) is Verdict.LAG:
            self._resync(feed, conn, "slow_consumer")

    def _resync(self, feed: Feed, conn: Connection, reason: str) -> None:
        """The connection missed a command: it subscribes again and finds it in the snapshot."""
        name = cluster_channel(feed.cluster_id)
        self.remove(conn, feed.cluster_id)
        self.resyncs += 1
        conn.send_message(Resync(channel=name, reason=reason))


def _json_frame(command: Command) -> Frame:
    return Frame(json_encoder.encode(command), True, PRIVATE_LEVEL)


def _pages(name: str, seq: int, commands: list[Command]) -> list[Snapshot]:
    """The snapshot's pages: commands in pages within a batch's byte bound (one command alone may exceed it)."""
    cursor = make_cursor(COMMAND_EPOCH, seq)
    pages: list[list[Command]] = [[]]
    size = 0
    for command in commands:
        n = len(json_encoder.encode(command))
        if pages[-1] and size + n > MAX_BATCH_BYTES:
            pages.append([])
            size = 0
        pages[-1].append(command)
        size += n
    return [
        Snapshot(
            channel=name,
            seq=seq,
            cursor=cursor,
            time=now_ms(),
            page=i,
            final=i == len(pages) - 1,
            commands=page,
        )
        for i, page in enumerate(pages)
    ]
