"""The broker: everything the gateway asks of Redis, as one interface split by capability.

The relay publishes a partition's channels under its epoch (`broker.publisher()`: a `PartitionPublisher`); a node
subscribes to the channels its connections follow (`broker.subscriber()`, `Subscribing`), reads a channel's
position and recent history (`broker.history`) and a light channel's stored state and its partition's fence
(`broker.channels`). Nodes mark who is online and the relay counts them (`broker.presence`); clusters report
figures (`broker.figures`); the relay leaves its heartbeat (`broker.relay_stats`). What must reach every node at
once (membership changes, channels moved to another team, revoked sessions) is announced through
`broker.announcements`. Actions reach the node holding a cluster's feed, and its confirmations the waiting node,
through `broker.commands` (between the gateway's processes: a cluster never holds a credential to the bus).

A node hears the bus through one handler it registers (`broker.subscriber(events)`, a
gateway.bus.events.BusEvents, as centrifuge's BrokerEventHandler): each channel's message, and typed events for
the rest (announcements, the link lost and restored). The broker never reaches into the node.

Every error is the bus's own (gateway.bus.errors: `BusUnavailable`, `BusRefused`, `Fenced`, `BusBehind`, all
`BusError`s): the Redis modules translate redis-py's at their boundary, and the memory broker raises the same.

A position is `(epoch, seq)`: the epoch names the relay that published (a new one at every takeover), so a
history rebuilt after a loss never reads as the continuation of the old one; seq counts a channel's messages.
A tag is the hash tag of a team's partition (`partitions.tag(team_id)`): every key of a partition shares it.

What every implementation keeps (tests/integration/test_broker_contract.py holds `RedisBroker` and
`gateway.bus.memory.MemoryBroker` to it):
- a bus out of reach fails every call with `BusUnavailable` and tells subscribers' handlers `BusLost`, then
  `BusRestored` once subscribed again;
- a publish is refused with `Fenced`, and writes nothing, once a newer epoch has taken the partition over;
- each message is atomic with its channel's position, its history entry and its state change; subscribers
  receive its envelope bytes unchanged, in publish order;
- the history keeps the newest `history_length` messages of a channel, fewer when their bytes (the
  MessagePack payloads) would pass `history_bytes`: the oldest go first, the newest is always kept; a seq at or
  below the history's newest starts it again;
- a marker is once-only: a successor relay sees the events its predecessor published;
- the relay cursor is written with a cycle's last message, never by a fenced-out relay;
- a publish is refused with `BusBehind`, and writes nothing of the cycle's last call, when the bus holds another
  relay cursor than the one the publisher last read or wrote (it lost what the relay published: a failover to a
  replica behind the old primary, a restart), until the publisher reads the relay cursor again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from ..core.team import ClusterFigures
from . import cluster_figures, history, keys
from . import relay_stats as stats
from .announcements import RedisAnnouncements
from .commands import RedisCommands, Replies
from .connection import Bus
from .errors import BusBehind, BusError, BusRefused, BusUnavailable, Fenced
from .events import Announcement, BusEvents
from .history import Entry
from .keys import Partitions
from .presence import PresenceManager
from .publisher import HISTORY_BYTES, PartitionPublisher, Publisher
from .relay_stats import RelayStats
from .subscriber import LIVENESS, Subscriber
from .translate import translated
from .user_sockets import UserSocketCounts

__all__ = [
    "Announcements",
    "Broker",
    "BusBehind",
    "BusError",
    "BusEvents",
    "BusRefused",
    "BusUnavailable",
    "ChannelState",
    "ClusterMetrics",
    "Commands",
    "Entry",
    "Fenced",
    "History",
    "PartitionPublisher",
    "Partitions",
    "Position",
    "PresenceStore",
    "RedisBroker",
    "RelayHeartbeats",
    "RelayStats",
    "Replies",
    "Subscribing",
]

Position = tuple[int, int]  # (epoch, seq) of a channel's last message


class Subscribing(Protocol):
    """A node's pub/sub (gateway.bus.subscriber.Subscriber). It tells the handler it was made with
    (gateway.bus.events.BusEvents) each message of a subscribed channel, `BusLost` when messages may have been
    missed (a lost connection, a slot that moved), `BusRestored` once subscribed again, and each announcement
    while `run()` runs."""

    reconnects: int
    moves: int  # channels that followed their slot to another shard
    lost_since: float | None  # since when (time.monotonic()) the bus has been out of reach; None: connected

    async def subscribe(self, tag: str, channel: str, timeout: float = 5.0) -> None:
        """Returns once the bus confirms, so nothing published afterwards is missed; BusUnavailable if it does
        not within `timeout` (the subscription stays wanted and is made when the bus is back)."""

    async def unsubscribe(self, tag: str, channel: str) -> None: ...

    async def run(self) -> None:
        """Hear the announcements and keep the connections up, until cancelled."""

    async def aclose(self) -> None: ...


class History(Protocol):
    async def position(self, tag: str, channel: str) -> Position | None:
        """(epoch, seq) of the channel's last message; None when the bus knows nothing of it."""

    async def positions(self, channels: dict[str, str]) -> dict[str, Position | None]:
        """Positions of channels given with their tags."""

    async def entries(self, tag: str, channel: str, first: int, last: int | None = None) -> list[Entry]:
        """The channel's kept messages with seq first..last (inclusive; None: up to the newest)."""


class ChannelState(Protocol):
    async def state(self, tag: str, channel: str) -> dict[bytes, bytes]:
        """A light channel's stored state: its fields, plus b"seq" and b"epoch" of the last message published
        on it once it has state; empty when it has none."""

    async def state_fields(self, tag: str, channel: str, names: list[bytes]) -> list[bytes | None]:
        """Only the named fields of a light channel's stored state, in order (None: not stored)."""

    async def fence(self, tag: str) -> int:
        """The partition's newest relay epoch (0 when the bus has none)."""

    async def fence_exists(self, tag: str) -> bool:
        """False when the bus lost the partition's keys (a restart)."""

    async def origin(self, tag: str) -> tuple[int, bool]:
        """The partition's fence (0: none) and whether a relay has put where it reads from on the bus (a relay
        cursor), in one read."""


class PresenceStore(Protocol):
    """Who is online (gateway.bus.presence.PresenceManager): per team, entries of (user, node) that expire
    unless their node refreshes them. A node's share is gateway.hub.presence.PresenceBoard."""

    async def join(self, node_id: str, team_id: int, user_id: int, ttl: float) -> None: ...

    async def refresh(self, node_id: str, entries: Iterable[tuple[int, int]], ttl: float) -> None: ...

    async def leave(self, node_id: str, team_id: int, user_id: int) -> None: ...

    async def leave_all(self, node_id: str, entries: Iterable[tuple[int, int]]) -> None: ...

    async def online(self, team_id: int, now: float | None = None) -> set[int]:
        """The team's users whose entry has not expired at `now` (None: the clock's)."""

    async def teams(self) -> list[int]:
        """Teams that have had anyone online (the relay looks at these)."""

    async def sweep(self, team_ids: list[int], now: float) -> dict[int, set[int]]:
        """Drop the team's entries that expired at or before `now`."""


class UserSockets(Protocol):
    """How many websockets each user holds in each process (gateway.bus.user_sockets), records that lapse
    unless renewed: the per-user limit across nodes and workers (gateway.core.user_sockets). A node's share is
    gateway.hub.user_sockets.SocketsHeld."""

    async def claim(self, process: str, user_id: int, count: int, limit: int, ttl: float) -> bool:
        """Record `count` sockets of the user in `process` if all processes' live records stay within `limit`."""

    async def record(self, process: str, counts: Mapping[int, int], ttl: float) -> None:
        """Set (renew) the users' records of `process`; a count of 0 takes a record out."""


class ClusterMetrics(Protocol):
    """Each cluster's latest figures (gateway.bus.cluster_figures)."""

    async def report(self, team_id: int, figures: ClusterFigures) -> None:
        """Keep a cluster's newest figures; they replace its previous ones."""

    async def teams(self) -> list[int]:
        """Teams that have had clusters reporting."""

    async def read(self, team_ids: list[int]) -> dict[int, list[ClusterFigures]]:
        """The latest figures of each team's clusters, for several teams in one round trip."""


class RelayHeartbeats(Protocol):
    """Each partition's relay heartbeat and figures (gateway.bus.relay_stats), expiring after the last write."""

    async def write(self, tag: str, figures: RelayStats) -> None: ...

    async def read(self, tags: list[str]) -> list[RelayStats | None]:
        """Each partition's figures in the order of `tags`; None where no relay reported lately."""


class Announcements(Protocol):
    """What every node hears at once (gateway.bus.announcements): membership changes, channels moved to another
    team, revoked sessions; each kind on a channel of its own, heard as the typed event it was announced as."""

    async def announce(self, announcement: Announcement) -> None: ...


class Commands(Protocol):
    """Commands to clusters and their confirmations between the gateway's processes (gateway.bus.commands): the
    sender publishes a command and reads its reply list (`Replies.key`); the node holding the cluster's feed hears
    it (`inbox`), and the node taking the cluster's confirmation pushes it onto that list (`confirm`)."""

    tag: str  # this process's reply lists'

    async def send(self, cluster_id: int, command: bytes) -> bool:
        """False when the cluster is certainly not listening (so nobody will confirm)."""

    def replies(self, command_id: str) -> AbstractAsyncContextManager[Replies]:
        """A reply list for one command, watched while the block runs."""

    def inbox(self, cluster_id: int) -> AbstractAsyncContextManager[AsyncIterator[bytes]]:
        """The commands sent to a cluster as they arrive; listening by the time the block starts."""

    async def confirm(self, reply_to: str, confirmation: bytes) -> None: ...

    async def aclose(self) -> None: ...


class Broker(Protocol):
    """Everything at once: what a node or a relay is given."""

    cluster: bool
    partitions: Partitions

    # Read-only, so that an implementation may hold its own classes of each capability.
    @property
    def history(self) -> History: ...

    @property
    def channels(self) -> ChannelState: ...

    @property
    def presence(self) -> PresenceStore: ...

    @property
    def user_sockets(self) -> UserSockets: ...

    @property
    def figures(self) -> ClusterMetrics: ...

    @property
    def relay_stats(self) -> RelayHeartbeats: ...

    @property
    def announcements(self) -> Announcements: ...

    @property
    def commands(self) -> Commands: ...

    def publisher(
        self, tag: str, epoch: int, history_length: int, history_ttl: int, history_bytes: int = ...
    ) -> PartitionPublisher: ...

    def subscriber(self, events: BusEvents, liveness: float = ...) -> Subscribing:
        """A node's subscriptions, telling `events` what it hears."""

    async def aclose(self) -> None: ...


# -- Redis: one server or a Cluster, composed of the bus's modules (each call's errors the bus's own)


class _RedisHistory:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    @translated
    async def position(self, tag: str, channel: str) -> Position | None:
        return await history.position(self.bus.redis, tag, channel)

    @translated
    async def positions(self, channels: dict[str, str]) -> dict[str, Position | None]:
        return await history.positions(self.bus, channels)

    @translated
    async def entries(self, tag: str, channel: str, first: int, last: int | None = None) -> list[Entry]:
        return await history.entries(self.bus, tag, channel, first, last)


class _RedisChannels:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    @translated
    async def state(self, tag: str, channel: str) -> dict[bytes, bytes]:
        return dict(await self.bus.redis.hgetall(keys.state(tag, channel)))

    @translated
    async def state_fields(self, tag: str, channel: str, names: list[bytes]) -> list[bytes | None]:
        if not names:
            return []
        return list(await self.bus.redis.hmget(keys.state(tag, channel), names))

    @translated
    async def fence(self, tag: str) -> int:
        value = await self.bus.redis.get(keys.epoch(tag))
        return int(value) if value is not None else 0

    @translated
    async def fence_exists(self, tag: str) -> bool:
        return bool(await self.bus.redis.exists(keys.epoch(tag)))

    @translated
    async def origin(self, tag: str) -> tuple[int, bool]:
        fence, cursor = await self.bus.mget([keys.epoch(tag), keys.relay_cursor(tag)])
        return (int(fence) if fence is not None else 0), cursor is not None


class _RedisFigures:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    @translated
    async def report(self, team_id: int, figures: ClusterFigures) -> None:
        await cluster_figures.report(self.bus.redis, team_id, figures)

    @translated
    async def teams(self) -> list[int]:
        return await cluster_figures.teams(self.bus.redis)

    @translated
    async def read(self, team_ids: list[int]) -> dict[int, list[ClusterFigures]]:
        return await cluster_figures.read_teams(self.bus.redis, team_ids)


class _RedisRelayStats:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus

    @translated
    async def write(self, tag: str, figures: RelayStats) -> None:
        await stats.write(self.bus.redis, tag, figures)

    @translated
    async def read(self, tags: list[str]) -> list[RelayStats | None]:
        return await stats.read(self.bus.redis, tags)


class RedisBroker:
    """The broker on a Redis server or a Redis Cluster (`Bus`)."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.cluster = bus.cluster
        self.partitions = bus.partitions
        self.history: History = _RedisHistory(bus)
        self.channels: ChannelState = _RedisChannels(bus)
        self.presence: PresenceStore = PresenceManager(bus.redis)
        self.user_sockets: UserSockets = UserSocketCounts(bus.redis)
        self.figures: ClusterMetrics = _RedisFigures(bus)
        self.relay_stats: RelayHeartbeats = _RedisRelayStats(bus)
        self.announcements: Announcements = RedisAnnouncements(bus.redis)
        self.commands: Commands = RedisCommands(bus)

    @classmethod
    def connect(cls, url: str, cluster: bool = False, partitions: int = 1) -> RedisBroker:
        return cls(Bus(url, cluster, partitions))

    def publisher(
        self, tag: str, epoch: int, history_length: int, history_ttl: int, history_bytes: int = HISTORY_BYTES
    ) -> PartitionPublisher:
        return Publisher(self.bus, tag, epoch, history_length, history_ttl, history_bytes)

    def subscriber(self, events: BusEvents, liveness: float = LIVENESS) -> Subscribing:
        return Subscriber(self.bus, events, liveness)

    async def aclose(self) -> None:
        await self.commands.aclose()
        await self.bus.aclose()


def _conforms(broker: RedisBroker) -> Broker:
    return broker  # mypy checks here that RedisBroker is a Broker
