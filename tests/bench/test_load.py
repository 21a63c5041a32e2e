"""The tap (bench/load.py): what the peers are fed carries what the gateway delivers, each changed job's whole
state and, in a team room, the team's counts after the transaction."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import msgspec
import pytest
from redis.asyncio import Redis

from bench.load import TapMessage, World, Writer, build_world, mix_statuses, team_counts
from gateway.core.grouping import Group, job_group
from gateway.core.model import Job
from gateway.store.queries import trajectory_groups


class Tap:
    """What the writer publishes to a real Redis, read back by a pattern subscription on `bench:*`."""

    def __init__(self, redis_url: str) -> None:
        self.redis = Redis.from_url(redis_url)
        self.pubsub = self.redis.pubsub()
        self.published: list[tuple[str, bytes]] = []

    async def __aenter__(self) -> Tap:
        await self.pubsub.psubscribe("bench:*")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.pubsub.aclose()
        await self.redis.aclose()

    async def read(self, count: int) -> None:
        """Wait (generously) until `count` messages in all have arrived."""
        deadline = asyncio.get_running_loop().time() + 30
        while len(self.published) < count and asyncio.get_running_loop().time() < deadline:
            message = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if message is not None:
                self.published.append((message["channel"].decode(), message["data"]))

    def messages(self, channel: str) -> list[TapMessage]:
        return [msgspec.json.decode(data, type=TapMessage) for c, data in self.published if c == channel]


async def jobs_now(pool: asyncpg.Pool, trajectory: int) -> dict[int, Job]:
    rows = await pool.fetch("select to_jsonb(j)::text as job from jobs j where trajectory_id = $1", trajectory)
    return {job.id: job for job in (msgspec.json.decode(r["job"], type=Job) for r in rows)}


@pytest.fixture
async def pool(url: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(url, min_size=1, max_size=4)
    yield pool
    await pool.close()


async def one_trajectory(pool: asyncpg.Pool, jobs: int) -> tuple[World, int, int]:
    """A world of one team with one trajectory of `jobs` jobs: the world, the team, the trajectory."""
    world = await build_world(pool, teams=1, trajectories_per_team=1, jobs_per_trajectory=jobs)
    team = world.teams[0]
    return world, team, world.trajectories[team][0]


async def test_the_tap_carries_whole_jobs_and_the_teams_counts_in_order(pool: asyncpg.Pool, redis_url: str) -> None:
    world, team, trajectory = await one_trajectory(pool, 10)
    async with Tap(redis_url) as tap:
        writer = Writer(pool, tap.redis, world, per_tx=5, concurrency=4, tap_team_channel=True)
        await writer.run(100, 0.2, [trajectory])
        await tap.read(2 * writer.committed)  # a trajectory's message and its team room's, each

    latest: dict[int, Job] = {}
    for message in tap.messages(f"bench:trajectory:{trajectory}"):
        assert message.channel == f"trajectory:{trajectory}" and message.counts is None
        for job in message.changes:
            if job.id not in latest or job.version > latest[job.id].version:
                latest[job.id] = job
    assert latest == {i: job for i, job in (await jobs_now(pool, trajectory)).items() if i in writer.changed}
    raw = next(data for c, data in tap.published if c.startswith("bench:trajectory:"))
    assert b'"name":"Preprocess frame' in raw and b"null" not in raw  # the gateway's fields, defaults left out

    # And the groups those changes moved, each with its counts after them: the latest (by seq) is the snapshot's.
    panels = tap.messages(f"bench:trajectory:{trajectory}")
    assert sorted(m.seq or 0 for m in panels) == list(range(1, writer.committed + 1))
    groups: dict[str, Group] = {}
    for message in sorted(panels, key=lambda m: m.seq or 0):
        assert message.groups and {g.key for g in message.groups} == {job_group(j) for j in message.changes}
        groups.update((g.key, g) for g in message.groups)
    snapshot = {g.key: g for g in await trajectory_groups(pool, trajectory)}
    assert groups == {key: group for key, group in snapshot.items() if key in groups}

    rooms = tap.messages(f"bench:team:{team}")
    assert len(rooms) == writer.committed and sorted(m.seq or 0 for m in rooms) == list(range(1, len(rooms) + 1))
    last = max(rooms, key=lambda m: m.seq or 0)
    assert last.counts == await team_counts(pool, team)


async def test_an_upload_counts_its_new_jobs_and_each_stage(pool: asyncpg.Pool, redis_url: str) -> None:
    world, team, trajectory = await one_trajectory(pool, 3)
    async with Tap(redis_url) as tap:
        writer = Writer(pool, tap.redis, world, tap_team_channel=True)
        await writer.upload(trajectory, 10, [("preprocess", None)], chunk=4)
        await tap.read(2 * writer.committed)
    rooms = tap.messages(f"bench:team:{team}")
    assert [len(m.changes) for m in rooms] == [4, 4, 2] * 3  # created, running, completed
    assert rooms[-1].counts == await team_counts(pool, team)
    assert rooms[-1].counts is not None and rooms[-1].counts["completed"] == 10
    assert rooms[-1].counts["queued"] == 3  # the team's jobs from before the upload are counted too


async def test_the_tap_keeps_each_shared_trajectorys_state_and_sets_it_before_its_changes(
    pool: asyncpg.Pool, redis_url: str
) -> None:
    """What a peer sends a new subscriber: the trajectory's listed jobs and groups, as the gateway's snapshot
    reads them, under the tap channel's name; read after any message, it holds that message's changes."""
    world, _, trajectory = await one_trajectory(pool, 20)
    await mix_statuses(pool, trajectory)  # as fanout and storm start: a third each
    statuses = await pool.fetch("select status, count(*) from jobs where trajectory_id = $1 group by 1", trajectory)
    assert {r["status"] for r in statuses} == {"queued", "running", "completed"}
    assert all(r["count"] in (6, 7) for r in statuses)
    channel = f"bench:trajectory:{trajectory}"
    decode = msgspec.json.Decoder(TapMessage).decode

    async def state() -> TapMessage:
        data = await tap.redis.get(channel)
        assert data is not None
        message = decode(data)
        assert message.state and message.channel == f"trajectory:{trajectory}"
        return message

    async def snapshot() -> tuple[dict[int, Job], list[Group]]:
        return await jobs_now(pool, trajectory), await trajectory_groups(pool, trajectory)

    async with Tap(redis_url) as tap:
        writer = Writer(pool, tap.redis, world, per_tx=5, concurrency=4)
        await writer.share_state([trajectory])
        first = await state()
        assert ({j.id: j for j in first.changes}, first.groups) == await snapshot() and first.seq is None

        behind: list[tuple[int, int | None]] = []  # a message whose changes the state read after it lacks

        async def follow() -> None:
            while True:
                message = await tap.pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is None:
                    continue
                changes = decode(message["data"])
                held = {j.id: j.version for j in (await state()).changes}
                if any(held[j.id] < j.version for j in changes.changes):
                    behind.append((changes.seq or 0, (await state()).seq))

        following = asyncio.create_task(follow())
        try:
            await writer.run(500, 1.0, [trajectory])
            await asyncio.sleep(0.5)
        finally:
            following.cancel()
            await asyncio.gather(following, return_exceptions=True)
        kept = await state()
    assert behind == [] and kept.seq == writer.committed
    assert ({j.id: j for j in kept.changes}, kept.groups) == await snapshot()


async def test_concurrent_writers_on_the_same_jobs_never_deadlock(pool: asyncpg.Pool) -> None:
    # Four connections changing five of six jobs each: every pair of transactions overlaps. Locked in the scan's
    # order (an update's bitmap scan follows where the rows' versions lie) they deadlocked within a second, as a
    # CI run once did on the tap's test above.
    world, _, trajectory = await one_trajectory(pool, 6)
    writer = Writer(pool, None, world, per_tx=5, concurrency=4)
    await writer.run(1000, 2.0, [trajectory])
    assert writer.committed == 2000 and writer.failed == 0
    versions = await pool.fetchval("select sum(version - 1) from jobs where trajectory_id = $1", trajectory)
    assert versions == writer.changes == 2000 * 5
