"""The node's periodic check of live subscriptions (gateway.hub.membership, `Memberships.recheck`): a trajectory
followed under a team that no longer owns it is caught even when its announcement was lost."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gateway.hub import membership
from gateway.hub.membership import Memberships


class Conn:
    def __init__(self, user_id: int, channels: dict[str, int]) -> None:
        self.user_id = user_id
        self.channels = channels
        self.sent: list[Any] = []

    def send_message(self, message: Any) -> None:
        self.sent.append(message)


class Access:
    def __init__(self, owners: dict[int, int]) -> None:
        self.owners = owners
        self.asked: list[list[int]] = []

    async def lost_memberships(self, pairs: set[tuple[int, int]]) -> list[tuple[int, int]]:
        return []

    async def trajectory_teams(self, ids: list[int]) -> dict[int, int]:
        self.asked.append(sorted(ids))
        return {i: self.owners[i] for i in ids if i in self.owners}


class Teams:
    def __init__(self) -> None:
        self.moved: list[str] = []

    def channel_moved(self, channel: str) -> None:
        self.moved.append(channel)


async def test_the_check_ends_only_the_subscriptions_made_under_a_team_that_lost_the_trajectory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(membership, "MEMBERSHIP_CHECK_EVERY", 0.0)
    # trajectory 7 moved from team 1 to team 2 (its announcement lost); trajectory 8 stays with team 1.
    access = Access({7: 2, 8: 1})
    stale = Conn(10, {"team:1": 1, "trajectory:7": 1, "trajectory:8": 1})
    fresh = Conn(11, {"team:2": 2, "trajectory:7": 2})
    other = Conn(12, {"team:1": 1, "trajectory:8": 1})
    ended: list[tuple[int, str]] = []

    def unsubscribe(conn: Any, channel: str) -> None:
        ended.append((conn.user_id, channel))
        del conn.channels[channel]

    teams = Teams()
    memberships = Memberships(access, None, {stale, fresh, other}, unsubscribe, teams)  # type: ignore[arg-type]
    task = asyncio.ensure_future(memberships.recheck())
    try:
        for _ in range(200):
            await asyncio.sleep(0)
            if len(access.asked) >= 2:
                break
    finally:
        task.cancel()
    assert access.asked[0] == [7, 8]
    assert ended == [(10, "trajectory:7")]
    assert teams.moved[0] == "trajectory:7" and "trajectory:8" not in teams.moved
    assert [m.channel for m in stale.sent] == ["trajectory:7"] and not fresh.sent and not other.sent
    assert stale.channels == {"team:1": 1, "trajectory:8": 1} and fresh.channels == {"team:2": 2, "trajectory:7": 2}
