"""A connection's channels that are not live: a snapshot, a replay or a catch-up is under way, and each one's
subscription (gateway.core.subscription) holds the channel's live frames meanwhile, all channels together within
the connection's bound. Empty for a connection that keeps up: the hub's shortcut needs it so.

A dict of the subscriptions by channel, so that the hot path's checks (`if held`, `channel in held`) cost what a
dict's do; the methods below are the only writes.
"""

from __future__ import annotations

from ..core.subscription import Subscription
from ..core.wsframe import Frame


class HeldChannels(dict[str, Subscription[Frame]]):
    __slots__ = ()

    def open(self, channel: str) -> Subscription[Frame]:
        """A subscription for a channel subscribed (again): one it had before is replaced (its runner stops)."""
        sub: Subscription[Frame] = Subscription(channel)
        earlier = self.get(channel)
        if earlier is not None:
            earlier.unsubscribed()
        self[channel] = sub
        return sub

    def lagging(self, channel: str, seq: int) -> Subscription[Frame]:
        """A live channel whose frame `seq` did not fit: a subscription that holds its frames (within the bound) until
        what the client missed has been sent from the channel's history."""
        sub: Subscription[Frame] = Subscription.following(channel)
        sub.bound_crossed(seq)
        self[channel] = sub
        return sub

    def hold(self, channel: str, seq: int, frame: Frame, limit: int) -> bool:
        """Whether the channel's subscription held the frame (False: the channel is live, the frame goes out)."""
        sub = self.get(channel)
        if sub is None:
            return False
        taken = sub.message(seq, frame, len(frame))
        if not sub.holding:  # live (dropping what the client has, up to its floor) or ended: no bound to mind
            if not taken and sub.settled:  # past its floor: nothing more for the machine to do
                del self[channel]
            return taken
        if sum(s.held_bytes for s in self.values()) > limit:
            # Held back past the bound (all channels together) behind a snapshot or a backlog the client is
            # slow to take: drop this channel's. Its history has them; going live replays them.
            sub.bound_crossed(seq)
        return True

    def release(self, sub: Subscription[Frame]) -> bool:
        """The subscription's `GoLive`: the channel is live again and the machine dropped (False: it had been
        replaced meanwhile, and nothing changes)."""
        if self.get(sub.channel) is not sub:
            return False
        if sub.settled:  # else it stays until the node's stream passes its floor (see `hold`)
            del self[sub.channel]
        return True

    def resync(self, channel: str, reason: str) -> None:
        """The client is told to reload the channel: whatever the subscription's runner still had to do is dropped."""
        sub = self.get(channel)
        if sub is not None:
            sub.resync(reason)

    def end(self, channel: str) -> bool:
        """Unsubscribed: the channel's subscription, if it had one (True), ends and is dropped."""
        sub = self.pop(channel, None)
        if sub is None:
            return False
        sub.unsubscribed()
        return True
