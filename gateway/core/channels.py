"""Channel names: what a subscriber asks for, and what it takes to be allowed."""

from __future__ import annotations

from typing import Literal

import msgspec

ChannelKind = Literal["team", "team-jobs", "trajectory"]
KINDS: tuple[ChannelKind, ...] = ("team", "team-jobs", "trajectory")


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


def parse_channel(name: str) -> Channel:
    """`team:7`, `team-jobs:7` or `trajectory:42`; anything else raises BadChannel with a readable reason."""
    kind, sep, ident = name.partition(":")
    if not sep or kind not in KINDS:
        raise BadChannel(f"unknown channel {name[:80]!r}: expected team:<id>, team-jobs:<id> or trajectory:<id>")
    if not ident.isdigit() or len(ident) > 18:
        raise BadChannel(f"bad channel id in {name[:80]!r}")
    return Channel(kind, int(ident))


def team(team_id: int) -> str:
    return f"team:{team_id}"


def team_jobs(team_id: int) -> str:
    return f"team-jobs:{team_id}"


def trajectory(trajectory_id: int) -> str:
    return f"trajectory:{trajectory_id}"
