"""A gateway node: the wiring of its hub, its bus subscription and its connections' subscriptions to channels.

Subscribing never races the stream: the node subscribes in the bus first (confirmed), holds what arrives,
then either replays what the client missed since its cursor from the channel's history, or reads the
channel's state and sends a snapshot; then it releases the held messages newer than that. The subscription
(gateway.core.subscription) decides each step; gateway.hub.subscription_runner does its reads and writes. The
rest is in modules of their own: whether a connection may subscribe (subscribe_checks), who may follow what
(membership), gap repair (repair), the bus subscriptions that follow local interest (interest), snapshots
(snapshots).

The node is the bus's handler (gateway.bus.events.BusEvents): its subscriber hands it each channel's message
(`handle_message`, straight to the hub) and every other event, typed (`handle`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable

from .. import tracing
from ..bus.channels import ChannelReads
from ..bus.events import BusEvent, BusLost, BusRestored, MembershipsChanged, OwnershipsChanged, PreferencesChanged
from ..core import channels, envelope
from ..core.channels import parse_channel
from ..core.histogram import Histogram
from ..core.keepalive import KeepaliveSlices, slices_for
from ..core.model import TrajectorySummary
from ..core.protocol import Error, Preferences
from ..core.revocation import Revocation
from ..core.subscription import Subscription
from ..core.wsframe import Frame, ping_frame
from .backlog import Backlog
from .cluster_feeds import ClusterFeeds
from .connection import CLOSE_BUS_LOST, Connection
from .errors import RETRY_AFTER, TRANSIENT
from .expiry import Expiries
from .hub import Hub
from .interest import Interest
from .membership import ChannelTeams, Memberships
from .ports import Access, NodeBus
from .presence import PresenceBoard
from .repair import Repairs
from .shared import SharedReads
from .snapshots import Snapshots, now_ms
from .subscribe_checks import SubscribeChecks
from .subscription_runner import SubscriptionRunner
from .tasks import Tasks

__all__ = ["Node", "now_ms"]

log = logging.getLogger(__name__)

KEEPALIVE_EVERY = 20.0  # a ping to each connection this often; one that has not answered by the next is closed


class Node:
    def __init__(
        self,
        access: Access,
        bus: NodeBus,
        max_subscriptions: int,
        presence: PresenceBoard,
        keepalive: float = KEEPALIVE_EVERY,
    ) -> None:
        self.keepalive_every = keepalive
        self.presence = presence
        self.connections: set[Connection] = set()
        self.most_held = 0  # the most connections open at once since `take_most_held` (memory given back)
        self.keepalive = KeepaliveSlices[Connection](slices_for(keepalive))
        self.expiries = Expiries()
        self.per_user: dict[int, int] = {}  # open connections per user, for the per-user limit
        self.per_cluster: dict[int, int] = {}  # clusters' feeds: the same limit, per cluster
        self.tasks = Tasks()
        self.shared = SharedReads()
        self.hub = Hub(on_empty=self._schedule_reconcile, on_gap=self._on_gap)
        self.reads = ChannelReads(bus.history, bus.channels)
        self.teams = ChannelTeams(access, bus.partitions, self.shared)
        self.memberships = Memberships(access, self.shared, self.connections, self.unsubscribe, self.teams)
        self.subscribe_checks = SubscribeChecks(self.teams, self.memberships, max_subscriptions, self._followed)
        self.backlog = Backlog(
            lambda channel, first, last: self.reads.entries(self.teams.tag(channel), channel, first, last)
        )
        self.repairs = Repairs(self.hub, self.reads, self.teams, self.backlog, self.tasks)
        # A bus link silent for most of a keepalive interval is taken for dead; lost for the rest of it, the
        # node's clients are closed (1013) to go elsewhere, and new ones refused: the whole within a keepalive.
        self.subscriber = bus.subscriber(self, liveness=0.6 * keepalive)
        self.on_revocation: Callable[[Revocation], None] = lambda revocation: None  # gateway.hub.revocations
        self.bus_grace = 0.4 * keepalive
        self.interest = Interest(self.hub, self.subscriber, self.teams)
        self.snapshots = Snapshots(access, self.reads, self.teams, self.shared, self.hub.anchor)
        self.subscription_runner = SubscriptionRunner(
            self.reads,
            self.teams,
            self.shared,
            self.backlog,
            self.snapshots,
            self.hub.anchor,
            self.hub.delivered_seq,
            self._resync,
        )
        self.cluster_feeds = ClusterFeeds(bus.commands, access.pending_commands)
        self.publish_to_write = Histogram()  # /metrics: the relay's publish to this node's write, per message
        # /metrics: a change's commit (PostgreSQL's clock) to this node's write, per message and channel kind
        self.delivery_lag: dict[str, Histogram] = {}
        self.closed_bytes = 0  # sent by connections that have closed since
        self.closed_frames = 0
        self.slow_closes = 0
        self.catch_ups = 0  # slow consumers' channels caught up from history instead of resynced
        self._runners: list[asyncio.Task[None]] = []

    async def team_summaries(self, team_id: int) -> list[TrajectorySummary]:
        """Every trajectory summary the team's channel lists now, as the relay stored it with its last publish."""
        name = channels.team(team_id)
        state = await self.reads.team_state(self.teams.partitions.tag(team_id), name)
        return state.summaries

    async def listed_summaries(self, team_id: int, trajectory_ids: list[int]) -> list[TrajectorySummary]:
        """The summaries of only these trajectories, of those the team's channel lists (a page of cards)."""
        name = channels.team(team_id)
        return await self.reads.team_summaries(self.teams.partitions.tag(team_id), name, trajectory_ids)

    async def start(self) -> None:
        self._runners = [
            asyncio.create_task(self.subscriber.run(), name="bus-subscriber"),
            asyncio.create_task(self.repairs.check_positions(), name="position-check"),
            asyncio.create_task(self.presence.run(), name="presence"),
            asyncio.create_task(self.memberships.recheck(), name="membership-check"),
            asyncio.create_task(self._keepalive(), name="keepalive"),
            asyncio.create_task(self.expiries.run(), name="expiries"),
            asyncio.create_task(self._watch_bus(), name="bus-watch"),
        ]

    async def stop(self) -> None:
        tasks = [*self._runners, *self.tasks.all()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.cluster_feeds.stop()
        await self.presence.clear()
        await self.subscriber.aclose()

    def revoke(self, team_id: int, user_id: int) -> None:
        """A member removed from a team: its connections leave the team's channels now."""
        self.memberships.revoke(team_id, user_id)

    # -- what the bus tells the node (gateway.bus.events.BusEvents)

    def handle(self, event: BusEvent) -> None:
        match event:
            case MembershipsChanged(changes=changes):
                self.memberships.changed(changes)
            case OwnershipsChanged(moved=moved):
                self.memberships.moved_teams(moved)
            case Revocation():
                self.on_revocation(event)
            case PreferencesChanged():
                self._tell_preferences(event)
            case BusLost():
                self.repairs.bus_lost()
            case BusRestored():
                self.repairs.bus_restored()

    def _tell_preferences(self, changed: PreferencesChanged) -> None:
        """A person chose which finishes reach them: each socket of theirs here is told, so that every tab of
        theirs follows the choice at once (a cluster's socket is never a person's)."""
        message = Preferences(finishes=changed.finishes)
        for conn in self.connections:
            if conn.user_id == changed.user_id and conn.cluster_id is None:
                conn.tell(message)

    def handle_message(self, channel: str, data: bytes) -> None:
        """The hub writes the message to the channel's subscribers; one it did write (not a duplicate, not held
        for a repair, not for nobody) counts toward publish-to-write latency, on the relay's clock, and toward
        its channel kind's delivery lag (commit to write, on PostgreSQL's clock), and, traced, as a span of the
        relay's publish (gateway.tracing)."""
        hub = self.hub
        fanned = hub.fanout_messages
        if tracing.enabled:
            self._traced(channel, data)
            return
        hub.on_message(channel, data)
        if hub.fanout_messages != fanned:
            self._observe_lag(channel, data)

    def _traced(self, channel: str, data: bytes) -> None:
        hub = self.hub
        fanned, started = hub.fanout_messages, time.time_ns()
        hub.on_message(channel, data)
        if hub.fanout_messages != fanned:
            trace = envelope.trace_of(data)
            if trace is not None:
                tracing.delivered(trace, channel, len(hub.subscribers.get(channel, ())), started)
            self._observe_lag(channel, data)

    def _observe_lag(self, channel: str, data: bytes) -> None:
        published, committed = envelope.stamps(data)
        if published:
            now = time.time()
            self.publish_to_write.observe(max(0.0, now - published))
            if committed:
                kind = channel.partition(":")[0]
                lag = self.delivery_lag.get(kind)
                if lag is None:
                    lag = self.delivery_lag[kind] = Histogram()
                lag.observe(max(0.0, now - committed))

    # -- connections

    def attach(self, conn: Connection) -> None:
        conn.on_lag = self._lagged
        self.connections.add(conn)
        self.most_held = max(self.most_held, len(self.connections))
        self.keepalive.add(conn)
        self.expiries.add(conn)  # a session ends with its token: the client renews it and connects again
        counts, holder = self._holder(conn)
        counts[holder] = counts.get(holder, 0) + 1

    def take_most_held(self) -> int:
        """The most connections open at once since the last call: a crowd that came and went between two
        looks counts (gateway.web.node.garbage.MemoryReturn)."""
        most, self.most_held = self.most_held, len(self.connections)
        return most

    def _holder(self, conn: Connection) -> tuple[dict[int, int], int]:
        """Whose connection it is, for the per-user limit: a person's, or a cluster's."""
        return (self.per_user, conn.user_id) if conn.cluster_id is None else (self.per_cluster, conn.cluster_id)

    def detach(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.keepalive.discard(conn)
            self.expiries.discard(conn)
            counts, holder = self._holder(conn)
            left = counts.pop(holder, 1) - 1
            if left:
                counts[holder] = left
            self.closed_bytes += conn.bytes_sent
            self.closed_frames += conn.frames_sent
            self.slow_closes += conn.close_code is not None
        if conn.cluster_id is not None:
            self.cluster_feeds.remove(conn, conn.cluster_id)
        for channel in conn.subscribed_channels():
            self.hub.remove(conn, channel)
            conn.leave(channel)
        for team_id in conn.teams_present:
            self.tasks.spawn(self.presence.remove(team_id, conn.user_id))
        conn.teams_present = ()

    async def subscribe(self, conn: Connection, name: str, cursor: str | None = None) -> None:
        allowed = await self.subscribe_checks.check(conn, name)
        if allowed is None:
            return
        channel, team_id = allowed
        if channel.kind == "cluster":
            await self.cluster_feeds.subscribe(conn, channel.id)
            return
        for attempt in (1, 2):
            sub = conn.open(name, team_id)
            since = self.shared.mark()  # reads that start from now on are fresh enough for this subscriber
            self.hub.add(conn, name)
            try:
                await self.interest.reconcile(name)
                sub.subscribed(cursor)
                await self.subscription_runner.run(conn, sub, channel, since)
                if channel.kind == "team" and channel.id not in conn.teams_present and name in conn.channels:
                    conn.teams_present += (channel.id,)  # an open view of the team: its user is online
                    await self.presence.add(channel.id, conn.user_id)
                return
            except TRANSIENT as exc:
                self.unsubscribe(conn, name)
                if attempt == 1 and conn.close_code is None:
                    # Often a pooled connection that died with a Redis or PostgreSQL restart: once more, fresh.
                    log.info("subscribe %s: %s, trying again", name, type(exc).__name__)
                    await asyncio.sleep(RETRY_AFTER)
                    continue
                log.warning("subscribe %s failed: %s", name, type(exc).__name__)
                conn.tell(Error(code="unavailable", message="the channel is unavailable, try again", channel=name))

    def unsubscribe(self, conn: Connection, name: str) -> None:
        if conn.cluster_id is not None:
            if name == channels.cluster(conn.cluster_id):
                self.cluster_feeds.remove(conn, conn.cluster_id)
            return
        conn.leave(name)
        self.hub.remove(conn, name)
        self._leave_team(conn, name)

    def _resync(self, conn: Connection, channel: str, reason: str) -> None:
        """Tell one client to reload a channel: it is unsubscribed until it subscribes again."""
        self.hub.resyncs += 1  # counted with the hub's: every resync sent (gateway_resyncs_total)
        conn.resync(channel, reason)
        self.hub.remove(conn, channel)
        self._leave_team(conn, channel)

    def _leave_team(self, conn: Connection, channel: str) -> None:
        kind, _, ident = channel.partition(":")
        if kind == "team" and int(ident) in conn.teams_present:
            conn.teams_present = tuple(t for t in conn.teams_present if t != int(ident))
            self.tasks.spawn(self.presence.remove(int(ident), conn.user_id))

    def _lagged(self, conn: Connection, sub: Subscription[Frame]) -> None:
        self.catch_ups += 1
        self.tasks.spawn(self.subscription_runner.catch_up(conn, sub, parse_channel(sub.channel)))

    def _followed(self, channel: str) -> bool:
        return channel in self.hub.subscribers or channel in self.interest.subscribed

    async def _keepalive(self) -> None:
        """One task pings a slice of the connections each tick (gateway.core.keepalive), instead of a timer per
        connection or one round for all. Ticks keep to a grid, so a late one does not push back the rest."""
        loop = asyncio.get_running_loop()
        tick = self.keepalive_every / self.keepalive.slices
        at = loop.time()
        while True:
            at += tick
            await asyncio.sleep(max(0.0, at - loop.time()))
            at = max(at, loop.time() - tick)  # after a stall, go on from now rather than catch up in a burst
            due = self.keepalive.due()
            if due:
                token = secrets.token_bytes(8)
                wire = ping_frame(token)
                for conn in due:
                    conn.link.ping(wire, token)

    @property
    def bus_out_of_reach(self) -> bool:
        """The bus lost for longer than its grace: the node can deliver nothing live (new sockets are refused)."""
        lost_since = self.subscriber.lost_since
        return lost_since is not None and time.monotonic() - lost_since >= self.bus_grace

    async def _watch_bus(self) -> None:
        """A node that has lost its bus for longer than its grace can deliver nothing live: rather than leave
        clients on a silent socket, close them with 1013 (they reconnect with backoff, through the load
        balancer to a node that has its bus, and resume from their cursors); new ones are refused until it is
        back. A short loss (a Redis restart) is filled in from the history instead, nobody closed."""
        told = False
        while True:
            await asyncio.sleep(min(1.0, self.bus_grace / 4))
            if not self.bus_out_of_reach:
                if told and self.subscriber.lost_since is None:
                    log.info("the bus is back: taking websockets again")
                    told = False
                continue
            if not told:
                told = True
                log.warning("the bus is out of reach: closing %d websocket(s) with 1013", len(self.connections))
            for conn in list(self.connections):  # any that got in meanwhile too
                conn.close(CLOSE_BUS_LOST)

    # -- the bus follows local interest; gaps are filled from history

    def _schedule_reconcile(self, channel: str) -> None:
        """The channel's last local subscriber left: the bus subscription follows, and its history blocks go."""
        self.backlog.release(channel)
        self.tasks.spawn(self.interest.reconcile(channel))

    def _on_gap(self, channel: str, first: int, last: int) -> None:
        self.repairs.gap(channel, first, last)
