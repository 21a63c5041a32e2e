"""The node's collaborators as small Protocols, so that a test can hand it in-memory ones.

The bus side is the broker's (gateway.bus.broker: `Subscribing`, `History`, `ChannelState`; Redis or memory);
PostgreSQL's is `Access` (gateway.store.access.NodeAccess).
"""

from __future__ import annotations

from typing import Protocol

from ..bus.broker import ChannelState, Commands, History, Partitions, Subscribing
from ..bus.events import BusEvents
from ..core.channels import Channel
from ..core.grouping import Group
from ..core.model import Counts, Job, TrajectorySummary
from ..core.protocol import Command


class Access(Protocol):
    """What the node reads from PostgreSQL."""

    async def team_of_channel(self, channel: Channel) -> int | None: ...

    async def is_member(self, user_id: int, team_id: int) -> bool: ...

    async def lost_memberships(self, pairs: set[tuple[int, int]]) -> list[tuple[int, int]]:
        """The (user, team) pairs that are no longer memberships."""

    async def trajectory_teams(self, trajectory_ids: list[int]) -> dict[int, int]:
        """The team of each trajectory that exists."""

    async def team_state(self, team_id: int) -> tuple[Counts, list[TrajectorySummary]]: ...

    async def trajectory_groups(self, trajectory_id: int) -> list[Group]: ...

    async def jobs_page(self, channel: Channel, after_id: int, limit: int) -> list[Job]: ...

    async def pending_commands(self, cluster_id: int, limit: int) -> tuple[int, list[Command]]:
        """A cluster's position (its last command's seq) and its commands not yet confirmed nor expired."""


class NodeBus(Protocol):
    """The part of the broker a node uses (gateway.bus.broker.RedisBroker, gateway.bus.memory.MemoryBroker)."""

    partitions: Partitions

    @property
    def history(self) -> History: ...

    @property
    def channels(self) -> ChannelState: ...

    @property
    def commands(self) -> Commands: ...

    def subscriber(self, events: BusEvents, liveness: float = ...) -> Subscribing: ...
