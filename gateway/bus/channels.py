"""What a node reads back of a channel from the bus: its position and history, a light channel's stored state
(decoded), and its partition's fence. The relay writes all of them atomically with each publish; the node
names no key and knows no field of the stored state: it asks `ChannelReads`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from ..core.batching import SUMMARY_STATE_PREFIX
from ..core.model import Counts, TrajectorySummary
from ..core.team import ClusterStats, Presence
from .broker import ChannelState, History, Position
from .history import Entry

_summary_decoder = msgspec.msgpack.Decoder(TrajectorySummary)
_counts_decoder = msgspec.msgpack.Decoder(Counts)
_presence_decoder = msgspec.msgpack.Decoder(Presence)
_stats_decoder = msgspec.msgpack.Decoder(ClusterStats)
_SUMMARY = SUMMARY_STATE_PREFIX.encode()


@dataclass
class TeamState:
    """A team channel's state as the relay stored it with its last publish."""

    seq: int | None = None  # of the last message published with state; None: no state stored (yet)
    epoch: int | None = None
    counts: Counts | None = None  # None: the relay stored no counts (the node reads them from PostgreSQL)
    summaries: list[TrajectorySummary] = field(default_factory=list)
    total: int | None = None  # trajectories listed in all, when stored
    presence: Presence | None = None
    clusters: ClusterStats | None = None


def decode_team_state(raw: dict[bytes, bytes]) -> TeamState:
    """The stored hash, decoded (unsorted)."""
    return TeamState(
        seq=int(raw[b"seq"]) if b"seq" in raw else None,
        epoch=int(raw[b"epoch"]) if b"epoch" in raw else None,
        counts=_counts_decoder.decode(raw[b"counts"]) if b"counts" in raw else None,
        summaries=[_summary_decoder.decode(v) for k, v in raw.items() if k.startswith(_SUMMARY)],
        total=int(raw[b"total"]) if b"total" in raw else None,
        presence=_presence_decoder.decode(raw[b"presence"]) if b"presence" in raw else None,
        clusters=_stats_decoder.decode(raw[b"clusters"]) if b"clusters" in raw else None,
    )


class ChannelReads:
    """A node's reads of channels, on the broker's history and channel state (Redis, or memory in tests).
    `tag` is the hash tag of the channel's team's partition."""

    def __init__(self, history: History, channels: ChannelState) -> None:
        self.history = history
        self.channels = channels

    async def position(self, tag: str, channel: str) -> Position | None:
        return await self.history.position(tag, channel)

    async def positions(self, channels: dict[str, str]) -> dict[str, Position | None]:
        return await self.history.positions(channels)

    async def entries(self, tag: str, channel: str, first: int, last: int) -> list[Entry]:
        return await self.history.entries(tag, channel, first, last)

    async def team_state(self, tag: str, channel: str) -> TeamState:
        return decode_team_state(await self.channels.state(tag, channel))

    async def team_summaries(self, tag: str, channel: str, trajectory_ids: list[int]) -> list[TrajectorySummary]:
        """Only the named trajectories' summaries of a team channel's stored state (those it lists), in order:
        a page of cards reads its own, never the team's whole state."""
        names = [f"{SUMMARY_STATE_PREFIX}{i}".encode() for i in trajectory_ids]
        found = await self.channels.state_fields(tag, channel, names)
        return [_summary_decoder.decode(raw) for raw in found if raw is not None]

    async def fence(self, tag: str) -> int:
        """The partition's active relay's epoch (0: none yet)."""
        return await self.channels.fence(tag)

    async def origin(self, tag: str) -> tuple[int, bool]:
        """The partition's epoch (0: none yet), and whether a relay has started on it: put where it reads the
        outbox from on the bus (its cursor). A snapshot read before then may miss changes committed before the
        first relay's own snapshot, which it never sends as deltas."""
        return await self.channels.origin(tag)

    async def fence_exists(self, tag: str) -> bool:
        """False when the bus lost the partition (a restart): the relay publishes everything again shortly."""
        return await self.channels.fence_exists(tag)
