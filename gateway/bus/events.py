"""What a node hears from the bus, handed to the one handler it registers (`BusEvents`, as centrifuge's
`BrokerEventHandler`): the broker never reaches into the node.

A channel's message is the hot path (thousands a second): it comes as `handle_message(channel, envelope)`, the
envelope's bytes as the relay published them, with no event object around them. Everything else is rare and
comes typed, through `handle(event)`:

- `MembershipsChanged`: members joined or left teams (the relay's); a member removed loses its subscriptions;
- `OwnershipsChanged`: channels moved to another team (the relay's); subscriptions under the old team end;
- `Revocation` (gateway.core.revocation): a session revoked (by `gateway revoke`, a sign-out, the account page);
- `PreferencesChanged` (gateway.core.preferences): a person chose which finishes reach them, in Account;
- `BusLost`: messages may have been missed from now on (a lost connection, a slot that moved);
- `BusRestored`: subscribed again: what was published meanwhile can be read from the history.

The first four are announcements: published once and heard by every node listening (gateway.bus.announcements);
each kind has a channel of its own.
"""

from __future__ import annotations

from typing import Literal, Protocol

import msgspec

from ..core.aggregate import MembershipsChanged, OwnershipsChanged
from ..core.preferences import PreferencesChanged
from ..core.revocation import Revocation

__all__ = [
    "LINK_LOST",
    "RESTORED",
    "SLOT_MOVED",
    "Announcement",
    "BusEvent",
    "BusEvents",
    "BusLost",
    "BusRestored",
    "MembershipsChanged",
    "OwnershipsChanged",
    "PreferencesChanged",
    "Revocation",
]


class BusLost(msgspec.Struct, frozen=True):
    cause: Literal["link lost", "slot moved"]


class BusRestored(msgspec.Struct, frozen=True):
    pass


# They carry nothing that varies: one of each is enough.
LINK_LOST = BusLost("link lost")
SLOT_MOVED = BusLost("slot moved")
RESTORED = BusRestored()

Announcement = MembershipsChanged | OwnershipsChanged | Revocation | PreferencesChanged
BusEvent = MembershipsChanged | OwnershipsChanged | Revocation | PreferencesChanged | BusLost | BusRestored


class BusEvents(Protocol):
    """The node's side: the subscriber calls these from its read loop, so they must not block."""

    def handle_message(self, channel: str, envelope: bytes) -> None:
        """A message of a subscribed channel (its name without the bus's prefix)."""

    def handle(self, event: BusEvent) -> None:
        """An announcement, or news of the link."""
