"""The broker in memory, with the semantics of the Redis one (gateway.bus.broker): for fast tests of the node and
the relay, with no server and no I/O.

    broker = MemoryBroker()
    publisher = broker.publisher(tag, epoch, history_length=100, history_ttl=3600)
    subscriber = broker.subscriber(handler)  # a gateway.bus.events.BusEvents
    await subscriber.subscribe(tag, channel)
    await publisher.publish([Publication(...)])
    await broker.delivered()  # the subscriber has received the message

Besides the `Broker` interface, tests can make the bus misbehave: `lose_connection()` (commands fail with
`BusUnavailable` as on a lost Redis connection, subscribers hear `BusLost`) and `restore_connection()`;
`drop_subscriptions()` (only
the nodes' pub/sub connections drop, as when Redis cuts off a slow subscriber: what is published meanwhile
reaches nobody, and is in the history); `forget_everything()` (Redis came back empty), `restart()` (lost,
emptied, back); `replica()` then `fail_over(replica)` (a replica promoted without the last writes);
`move_slot(tag)` (a partition's slot moved to another shard); `fill_memory()` then `free_memory()` (a Redis out
of memory refuses writes). A `clock` (Unix seconds) drives every expiry:
histories, markers, presence, the relays' figures, kept confirmations.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..broker import Broker
from ..events import BusEvents
from ..keys import Partitions
from ..publisher import HISTORY_BYTES
from .commands import MemoryCommands
from .figures import MemoryFigures, MemoryRelayStats
from .history import MemoryChannels, MemoryHistory
from .keyspace import Keyspace
from .presence import MemoryPresence
from .publisher import MemoryPublisher
from .pubsub import Exchange, MemoryAnnouncements, MemorySubscriber
from .user_sockets import MemoryUserSockets

__all__ = ["MemoryBroker", "MemoryPublisher", "MemorySubscriber"]


class MemoryBroker:
    def __init__(self, partitions: int = 1, clock: Callable[[], float] = time.time) -> None:
        self.cluster = False
        self.partitions = Partitions(partitions)
        self.space = Keyspace(clock)
        self.exchange = Exchange(self.space)
        self.history = MemoryHistory(self.space)
        self.channels = MemoryChannels(self.space)
        self.presence = MemoryPresence(self.space)
        self.user_sockets = MemoryUserSockets(self.space)
        self.figures = MemoryFigures(self.space)
        self.relay_stats = MemoryRelayStats(self.space)
        self.announcements = MemoryAnnouncements(self.exchange)
        self.commands = MemoryCommands(self.space)

    def publisher(
        self, tag: str, epoch: int, history_length: int, history_ttl: int, history_bytes: int = HISTORY_BYTES
    ) -> MemoryPublisher:
        return MemoryPublisher(self.space, self.exchange, tag, epoch, history_length, history_ttl, history_bytes)

    def subscriber(
        self,
        events: BusEvents,
        liveness: float = 0.0,  # nothing to watch: the memory bus is never out of reach unless a test says so
    ) -> MemorySubscriber:
        return MemorySubscriber(self.exchange, events)

    async def aclose(self) -> None:
        self.exchange.linked.clear()
        await self.commands.aclose()

    async def delivered(self) -> None:
        """Wait until subscribers have received everything published so far."""
        await self.exchange.delivered()

    # -- what tests make happen

    def lose_connection(self) -> None:
        """Redis is unreachable: commands fail with BusUnavailable, subscribers hear `BusLost`, and what they had
        not yet received is lost."""
        self.space.down = True
        self.exchange.lose()

    def fill_memory(self) -> None:
        """Redis is out of memory (`maxmemory`, `noeviction`): writes are refused with BusRefused until
        `free_memory()`; reads, publishing to subscribers and deletions go on."""
        self.space.full = True

    def free_memory(self) -> None:
        self.space.full = False

    def drop_subscriptions(self) -> None:
        """The subscribers' connections drop (commands still work): they hear `BusLost`, and miss what is
        published until `restore_connection()`."""
        self.exchange.lose()

    def restore_connection(self) -> None:
        """Redis answers again: subscribers are subscribed again, then hear `BusRestored`."""
        self.space.down = False
        self.exchange.restore()

    def forget_everything(self) -> None:
        """Redis lost its data (restarted empty): fences, positions, histories, state, markers, presence..."""
        self.space.clear()

    def restart(self) -> None:
        """Redis restarted empty: connections lost, data gone, connections back."""
        self.lose_connection()
        self.forget_everything()
        self.restore_connection()

    def replica(self) -> dict[str, object]:
        """What a replica holds now, if it received nothing more: `fail_over(replica)` promotes it."""
        return self.space.copy()

    def fail_over(self, replica: dict[str, object]) -> None:
        """The primary is replaced by a replica that had not received what was written after `replica()` (a
        failover that loses the old primary's last writes): connections lost, those writes gone, connections back."""
        self.lose_connection()
        self.space.restore(replica)
        self.restore_connection()

    def move_slot(self, tag: str) -> None:
        """The partition's slot moved to another shard: subscribers follow it, each channel a possible gap."""
        self.exchange.move(tag)


def _conforms(broker: MemoryBroker) -> Broker:
    return broker  # mypy checks here that MemoryBroker is a Broker
