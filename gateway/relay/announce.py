"""The relay's announcements to every node, typed for the bus (gateway.bus.announcements sends each kind on a
channel of its own).

The publish cycle (gateway.relay.cycle) hands them over encoded as it always has: a JSON list of membership
changes, or `{"moved": [...]}` for channels that changed team. `typed` reads them back into the bus's events;
once the cycle announces `MembershipsChanged` and `OwnershipsChanged` itself, this module goes.
"""

from __future__ import annotations

import msgspec

from ..bus.events import Announcement, MembershipsChanged, OwnershipsChanged
from ..core.aggregate import MembershipChange

_memberships = msgspec.json.Decoder(list[MembershipChange])
_ownerships = msgspec.json.Decoder(OwnershipsChanged)


def typed(payload: bytes) -> Announcement:
    """The announcement the cycle encoded (an object is the ownerships', a list the memberships')."""
    if payload[:1] == b"{":
        return _ownerships.decode(payload)
    return MembershipsChanged(_memberships.decode(payload))
