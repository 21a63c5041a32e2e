"""Channel names: what a subscriber asks for, and what it takes to be allowed."""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from .types import MAX_ID

ChannelKind = Literal["team", "team-jobs", "trajectory", "cluster"]
# `cluster:<id>`: a cluster's commands, for its own key only (gateway.hub.cluster_feeds); the rest are a team's.
KINDS: tuple[ChannelKind, ...] = ("team", "team-jobs", "trajectory", "cluster")


class Channel(msgspec.Struct, frozen=True):
    kind: ChannelKind
    id: int

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.id}"

    def __str__(self) -> str:
        return self.name


class BadChannel(ValueError):
    pass


# ASCII digits only (str.isdigit also takes "²" and "١", which int() then refuses or reads as another number),
# no leading zero: one id has one spelling, so the name a client sends is the name used everywhere.
_ID = re.compile(r"[1-9][0-9]{0,18}")


def parse_id(text: str) -> int | None:
    """A positive 64-bit id written the one canonical way, or None."""
    if _ID.fullmatch(text) is None:
        return None
    value = int(text)
    return value if value <= MAX_ID else None


def parse_channel(name: str) -> Channel:
    """`team:7`, `team-jobs:7`, `trajectory:42` or `cluster:3`; anything else raises BadChannel with a readable reason.
    A channel that parses has exactly the name it was given (`Channel.name == name`)."""
    kind, sep, ident = name.partition(":")
    if not sep or kind not in KINDS:
        raise BadChannel(
            f"unknown channel {name[:80]!r}: expected team:<id>, team-jobs:<id>, trajectory:<id> or cluster:<id>"
        )
    channel_id = parse_id(ident)
    if channel_id is None:
        raise BadChannel(f"bad channel id in {name[:80]!r}: expected a positive integer without leading zeros")
    return Channel(kind, channel_id)


def team(team_id: int) -> str:
    return f"team:{team_id}"


def team_jobs(team_id: int) -> str:
    return f"team-jobs:{team_id}"


TRAJECTORY_PREFIX = "trajectory:"


def trajectory(trajectory_id: int) -> str:
    return f"{TRAJECTORY_PREFIX}{trajectory_id}"


CLUSTER_PREFIX = "cluster:"


def cluster(cluster_id: int) -> str:
    return f"{CLUSTER_PREFIX}{cluster_id}"
