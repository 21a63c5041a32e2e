"""A node's view of one channel's stream: in order, a gap, or from a fenced-out relay."""

from __future__ import annotations

import enum


class Arrival(enum.Enum):
    NEXT = "next"  # the next message: deliver it
    FIRST = "first"  # nothing seen before on this node: deliver it, it starts the stream here
    DUPLICATE = "duplicate"  # already delivered: drop it
    STALE_EPOCH = "stale_epoch"  # from a relay that has been replaced: drop it
    GAP = "gap"  # messages were lost in between: subscribers must recover


class ChannelStream:
    """Tracks the newest (epoch, seq) a node has delivered on a channel."""

    __slots__ = ("epoch", "seq")

    def __init__(self) -> None:
        self.epoch = -1
        self.seq = -1

    def arrive(self, epoch: int, seq: int) -> Arrival:
        if epoch < self.epoch:
            return Arrival.STALE_EPOCH
        first = self.seq < 0
        previous, newer_epoch = self.seq, epoch > self.epoch
        if not first and seq <= previous and not newer_epoch:
            return Arrival.DUPLICATE
        self.epoch, self.seq = epoch, seq
        if first:
            return Arrival.FIRST
        # A new relay continues the channel's sequence, so a takeover is contiguous too; a new epoch
        # that does not continue it (the bus lost its positions) is a gap like any other.
        return Arrival.NEXT if seq == previous + 1 else Arrival.GAP
