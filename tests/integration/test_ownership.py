"""A trajectory the platform moves to another team: its old team's open subscriptions end on every
node, and nobody answers from the team they had cached.

Before, each node remembered a channel's team for ever: after `update trajectories set team_id = ...`, the old
team's open subscription received the new team's jobs, and a fresh subscribe on the same node more than 15 s
later still got the snapshot (another node said `forbidden`, HTTP said 403).
"""

from __future__ import annotations

import asyncpg

from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs, make_team


def forbidden(follower: Follower, channel: str) -> int:
    return sum(1 for e in follower.errors if e.get("code") == "forbidden" and e.get("channel") == channel)


async def test_a_moved_trajectory_ends_the_old_teams_subscriptions_on_every_node(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    other = await make_team(pool, stack.secret)
    channel = f"trajectory:{team.trajectory_id}"
    async with (
        Follower(stack.nodes[0].ws, team.token) as first,
        Follower(stack.nodes[1].ws, team.token) as second,
    ):
        for follower in (first, second):
            await follower.subscribe(channel)
            await follower.subscribe(f"team:{team.id}")
        for follower in (first, second):
            await follower.wait_for(
                lambda f: f.channels[channel].snapshot_done and f.channels[f"team:{team.id}"].snapshot_done
            )

        await pool.execute("update trajectories set team_id = $1 where id = $2", other.id, team.trajectory_id)

        # Both nodes end the old team's subscription, saying why.
        for follower in (first, second):
            await follower.wait_for(lambda f: forbidden(f, channel) == 1, timeout=20)
        error = next(e for e in first.errors if e.get("channel") == channel)
        assert error["message"] == f"{channel} moved to another team"

        # The new team's jobs on it reach the new team only.
        await insert_jobs(pool, other, 3, trajectory_id=team.trajectory_id)
        async with Follower(stack.nodes[1].ws, other.token) as newcomer:
            await newcomer.subscribe(channel)
            await newcomer.wait_for(lambda f: f.channels.get(channel) is not None and len(f.listed(channel)) == 3)

            # Asked again on either node, by the old team, it is refused: no node answers from a stale team.
            for follower in (first, second):
                await follower.subscribe(channel)
                await follower.wait_for(lambda f: forbidden(f, channel) == 2, timeout=20)
            assert first.listed(channel) == {} and second.listed(channel) == {}
            # The old team's other subscriptions go on.
            assert all(f.closed is None and f.channels[f"team:{team.id}"].snapshot_done for f in (first, second))

            # Moved back, the team that owns it again may follow it; the other team's subscription ends.
            await pool.execute("delete from jobs where trajectory_id = $1", team.trajectory_id)
            await pool.execute("delete from submissions where trajectory_id = $1", team.trajectory_id)
            await pool.execute("update trajectories set team_id = $1 where id = $2", team.id, team.trajectory_id)
            await newcomer.wait_for(lambda f: forbidden(f, channel) == 1, timeout=20)
            await first.subscribe(channel)
            await first.wait_for(lambda f: f.channels[channel].snapshot_done and forbidden(f, channel) == 2)
    for node in stack.nodes:
        assert "Traceback" not in node.output(), node.tracebacks()
