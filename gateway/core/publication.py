"""What the relay publishes: one message for one channel, stamped with the channel's next sequence in the
epoch and encoded once per wire format (gateway.core.batching makes them, the bus publishes them)."""

from __future__ import annotations

import msgspec

from .protocol import Batch, ClustersUpdate, Glow, Notice, PresenceUpdate, Summary, encode_both


class Publication(msgspec.Struct, kw_only=True):
    """One message for one channel, encoded once per wire format, ready for Redis.

    For the light team channel, `state_set`/`state_del` are the fields of the channel's stored state to
    write atomically with the publish, so a node's snapshot read never races the stream.
    """

    channel: str
    epoch: int
    seq: int
    json: bytes
    msgpack: bytes
    state_set: dict[str, bytes] | None = None
    state_del: list[str] | None = None
    marker: str | None = None  # a key set with the publish: this once-only event went out


class Sequences:
    """Each channel's last sequence in this epoch; a message stamped with the next one is encoded once."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.last: dict[str, int] = {}

    def next(self, channel: str) -> int:
        seq = self.last.get(channel, 0) + 1
        self.last[channel] = seq
        return seq

    def publication(
        self, channel: str, seq: int, message: Batch | Summary | Notice | Glow | PresenceUpdate | ClustersUpdate
    ) -> Publication:
        as_json, as_msgpack = encode_both(message)
        return Publication(channel=channel, epoch=self.epoch, seq=seq, json=as_json, msgpack=as_msgpack)
