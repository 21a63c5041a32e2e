"""Announcements: what must reach every node at once, each kind on a channel of its own.

- `gw:memberships`: the relay's membership changes (a member removed from a team loses its subscriptions);
- `gw:ownerships`: the relay's channels moved to another team (their old team's subscriptions end);
- `gw:revocations`: a revoked session, from `gateway revoke` or a node (its websockets are closed);
- `gw:preferences`: a person's changed preferences, from a node (that person's open sockets are told).

Classic pub/sub channels, never sharded, so on a Redis Cluster a publish reaches every shard's nodes. Nothing is
kept: a node that missed one finds the change in PostgreSQL on its next periodic check. Each payload is its event
(gateway.bus.events) in JSON; a node decodes it by the channel it came on.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from .events import Announcement, MembershipsChanged, OwnershipsChanged, PreferencesChanged, Revocation
from .keys import MEMBERSHIPS, OWNERSHIPS, PREFERENCES, REVOCATIONS
from .translate import translated

log = logging.getLogger(__name__)

_encoder = msgspec.json.Encoder()
_decoders: dict[str, msgspec.json.Decoder[Any]] = {
    MEMBERSHIPS: msgspec.json.Decoder(MembershipsChanged),
    OWNERSHIPS: msgspec.json.Decoder(OwnershipsChanged),
    REVOCATIONS: msgspec.json.Decoder(Revocation),
    PREFERENCES: msgspec.json.Decoder(PreferencesChanged),
}


def channel_of(announcement: Announcement) -> str:
    if isinstance(announcement, MembershipsChanged):
        return MEMBERSHIPS
    if isinstance(announcement, OwnershipsChanged):
        return OWNERSHIPS
    if isinstance(announcement, PreferencesChanged):
        return PREFERENCES
    return REVOCATIONS


def decode(channel: str, data: bytes) -> Announcement | None:
    """The announcement a payload on `channel` carries; None (logged) for one this version cannot read."""
    try:
        return _decoders[channel].decode(data)
    except msgspec.DecodeError:
        log.warning("ignored an undecodable message on %s", channel)
        return None


class RedisAnnouncements:
    def __init__(self, redis: Any) -> None:
        self.redis = redis

    @translated
    async def announce(self, announcement: Announcement) -> None:
        """Send it to every node listening now."""
        await self.redis.publish(channel_of(announcement), _encoder.encode(announcement))
