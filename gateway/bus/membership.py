"""The membership channel: what must reach every node at once to end access already granted.

Two kinds of payload share it: the relay's membership changes (a list: a member removed from a team loses its
subscriptions) and a revoked session from `gateway revoke` or a node (one object: its websockets are closed).
It is a classic pub/sub channel, never sharded, so on a Redis Cluster a publish reaches every shard's nodes.
Nothing is kept: a node that missed a message finds the change in PostgreSQL on its next periodic check.
"""

from __future__ import annotations

from typing import Any

from . import keys

CHANNEL = keys.MEMBERSHIP  # the name nodes subscribe to


async def publish(redis: Any, payload: bytes) -> None:
    """Send an encoded membership change or revocation to every node listening now."""
    await redis.publish(CHANNEL, payload)
