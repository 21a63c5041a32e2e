"""Whether a connection may subscribe to a channel: a well-formed name, room within the connection's limit of
subscriptions, and a channel of a team its user is a member of (gateway.hub.membership); a cluster's channel
(`cluster:<id>`) only to that cluster's own key, which may follow nothing else. A refusal is answered here, as the protocol's `error` about the channel: `bad_channel`, `too_many_subscriptions`, `forbidden`, or
`unavailable` (to try again) when the membership check failed twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ..core.channels import BadChannel, Channel, parse_channel
from ..core.protocol import Error
from .connection import Connection
from .errors import RETRY_AFTER, TRANSIENT
from .membership import ChannelTeams, Memberships

log = logging.getLogger("gateway.hub.node")  # the node's log: what it says about a subscribe stays in one place


class SubscribeChecks:
    def __init__(
        self,
        teams: ChannelTeams,
        memberships: Memberships,
        max_subscriptions: int,
        followed: Callable[[str], bool],
    ) -> None:
        self.teams = teams
        self.memberships = memberships
        self.max_subscriptions = max_subscriptions
        self.followed = followed  # channels this node follows: their teams are kept however many it looked up

    async def check(self, conn: Connection, name: str) -> tuple[Channel, int] | None:
        """The channel and its team if the connection may subscribe; else None, and the client has been told why."""
        try:
            channel = parse_channel(name)
        except BadChannel as exc:
            conn.reply(Error(code="bad_channel", message=str(exc), channel=name[:80]))
            return None
        if channel.kind == "cluster" or conn.cluster_id is not None:
            if conn.cluster_id is not None and channel == Channel("cluster", conn.cluster_id):
                return channel, 0  # a cluster is of a team, but its feed is its own
            whose = "only its own cluster's key may follow" if channel.kind == "cluster" else "a cluster's key follows"
            what = f"{name}" if channel.kind == "cluster" else "its own commands' channel only"
            conn.reply(Error(code="forbidden", message=f"{whose} {what}", channel=name))
            return None
        if name not in conn.channels and len(conn.channels) >= self.max_subscriptions:
            conn.reply(
                Error(
                    code="too_many_subscriptions",
                    message=f"at most {self.max_subscriptions} subscriptions per connection",
                    channel=name,
                )
            )
            return None
        try:
            team_id = await self._member_team(conn, channel)
        except TRANSIENT as exc:
            log.warning("subscribe %s: membership check failed: %s", name, type(exc).__name__)
            conn.tell(Error(code="unavailable", message="the channel is unavailable, try again", channel=name))
            return None
        if team_id is None:
            # The same answer whether it exists or not: a foreign team's ids are not revealed.
            conn.reply(Error(code="forbidden", message=f"not a member of the team of {name}", channel=name))
            return None
        return channel, team_id

    async def _member_team(self, conn: Connection, channel: Channel) -> int | None:
        """The channel's team if the connection's user is one of its members, else None (no such channel or
        not a member). A read failing once is tried again on a fresh connection: a pooled one that died with a
        PostgreSQL restart fails on first use, and a client answered `unavailable` would reload for nothing."""
        for attempt in (1, 2):
            try:
                team_id = await self.teams.team_of(channel, self.followed)
                member = team_id is not None and await self.memberships.is_member(conn.user_id, team_id)
                return team_id if member else None
            except TRANSIENT as exc:
                if attempt == 2 or conn.close_code is not None:
                    raise
                log.info("membership check for %s: %s, trying again", channel.name, type(exc).__name__)
                await asyncio.sleep(RETRY_AFTER)
        raise AssertionError("unreachable")
