"""Who may follow a channel: its team and the user's membership of it.

A member removed from a team loses its subscriptions at once, on every node: the relay announces membership
changes on the bus (heard as `MembershipsChanged`), and every node checks its live subscriptions now and then in
case one announcement was lost. A trajectory the platform moves to another team is announced the same way: its old
team's subscriptions end (`forbidden`), and its team is read again from PostgreSQL on the next subscribe.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ..bus.broker import Partitions
from ..core.aggregate import MembershipChange, OwnershipChange
from ..core.channels import Channel
from ..core.protocol import Error
from .connection import Connection
from .errors import TRANSIENT
from .ports import Access
from .shared import SharedReads

MEMBERSHIP_CHECK_EVERY = 30.0
MEMBER_TTL = 10.0  # a membership checked this recently is not asked again (removals revoke it at once)
MAX_CHANNEL_TEAMS = 100_000  # past this, forget the teams of channels nobody here follows


class ChannelTeams:
    """The team of each channel this node has looked up, and so its partition's hash tag in the bus."""

    def __init__(self, access: Access, partitions: Partitions, shared: SharedReads) -> None:
        self.access = access
        self.partitions = partitions
        self.shared = shared
        self._teams: dict[str, int] = {}
        self.moved: set[str] = set()  # channels announced as moved to another team: their cached team is stale

    async def team_of(self, channel: Channel, followed: Callable[[str], bool]) -> int | None:
        name = channel.name
        team_id = None if name in self.moved else self._teams.get(name)
        if team_id is None:
            team_id = await self.shared.read(("team", name), lambda: self.access.team_of_channel(channel))
            if team_id is None:
                return None
            previous = self._teams.get(name)
            # A moved channel's bus subscription, while it lasts, stays under its old team's partition tag.
            if previous is None or not followed(name) or self.partitions.tag(previous) == self.partitions.tag(team_id):
                self.moved.discard(name)
                if len(self._teams) > MAX_CHANNEL_TEAMS:  # keep what is followed: its tag is needed
                    self._teams = {c: t for c, t in self._teams.items() if followed(c)}
                self._teams[name] = team_id
        return team_id

    def channel_moved(self, channel: str) -> None:
        """Its team changed: the next subscribe reads it from PostgreSQL again."""
        if channel in self._teams:
            self.moved.add(channel)

    def known(self, channel: str) -> bool:
        return channel in self._teams

    def tag(self, channel: str) -> str:
        """The hash tag of a followed channel's keys in the bus: its team's partition's."""
        return self.partitions.tag(self._teams[channel])


class Memberships:
    """`unsubscribe(conn, channel)` is the node's: it takes a connection off a channel."""

    def __init__(
        self,
        access: Access,
        shared: SharedReads,
        connections: set[Connection],
        unsubscribe: Callable[[Connection, str], None],
        teams: ChannelTeams,
    ) -> None:
        self.access = access
        self.teams = teams
        self.shared = shared
        self.connections = connections
        self.unsubscribe = unsubscribe
        self._members: dict[tuple[int, int], float] = {}  # (user, team) -> when found a member

    async def is_member(self, user_id: int, team_id: int) -> bool:
        key = (user_id, team_id)
        checked = self._members.get(key)
        if checked is not None and time.monotonic() - checked < MEMBER_TTL:
            return True
        member = await self.shared.read(("member", key), lambda: self.access.is_member(user_id, team_id))
        if member:
            self._members[key] = time.monotonic()
        else:
            self._members.pop(key, None)
        return member

    def changed(self, changes: list[MembershipChange]) -> None:
        """The relay announced membership changes: those removed from a team lose its channels."""
        for change in changes:
            if not change.member:
                self.revoke(change.team_id, change.user_id)

    def moved_teams(self, moved: list[OwnershipChange]) -> None:
        """The relay announced channels that changed team."""
        for move in moved:
            self.moved(move.channel, move.team_id)

    def revoke(self, team_id: int, user_id: int) -> None:
        self._members.pop((user_id, team_id), None)
        for conn in [c for c in self.connections if c.user_id == user_id]:
            for name in [n for n, t in conn.channels.items() if t == team_id]:
                self.unsubscribe(conn, name)
                conn.send_message(
                    Error(code="forbidden", message="you are no longer a member of this team", channel=name)
                )

    def moved(self, channel: str, team_id: int) -> None:
        """A channel now belongs to `team_id`: every subscription to it made under another team ends (a member
        of the new team subscribes again; its team is read afresh)."""
        self.teams.channel_moved(channel)
        for conn in [c for c in self.connections if c.channels.get(channel, team_id) != team_id]:
            self.unsubscribe(conn, channel)
            conn.send_message(Error(code="forbidden", message=f"{channel} moved to another team", channel=channel))

    async def recheck(self) -> None:
        """The safety net for a membership message the bus dropped: check every live subscription now and then."""
        while True:
            await asyncio.sleep(MEMBERSHIP_CHECK_EVERY)
            stale = time.monotonic() - MEMBER_TTL
            self._members = {k: at for k, at in self._members.items() if at > stale}
            pairs = {(c.user_id, t) for c in self.connections for t in c.channels.values()}
            if not pairs:
                continue
            followed = {n for c in self.connections for n in c.channels if n.startswith("trajectory:")}
            try:
                lost = await self.access.lost_memberships(pairs)
                owners = await self.access.trajectory_teams([int(n[11:]) for n in followed])
            except TRANSIENT:
                continue
            for user_id, team_id in lost:
                self.revoke(team_id, user_id)
            # A move whose announcement was lost, or came while a subscribe was on its way: the teams each trajectory
            # is followed under now, in one pass over the subscriptions (not a pass over every connection for each
            # trajectory: 4,000 connections following 100 trajectories made 400,000 steps every 30 s).
            under: dict[str, set[int]] = {}
            for c in self.connections:
                for n, t in c.channels.items():
                    if n in followed:
                        under.setdefault(n, set()).add(t)
            for name, teams in under.items():
                owner = owners.get(int(name[11:]))
                if owner is not None and teams != {owner}:
                    self.moved(name, owner)
