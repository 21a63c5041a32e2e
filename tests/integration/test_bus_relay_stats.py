"""gateway.bus.relay_stats against a real Redis: the figures read back as written, typed; a figure a relay of
an older version did not write reads as 0."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.bus import keys, relay_stats
from gateway.bus.relay_stats import RelayStats

TAG = "relay-stats-test"  # no partition's tag: a stack running beside these tests never reads it


@pytest.fixture
def redis(scratch_redis: Redis) -> Redis:
    return scratch_redis


async def test_figures_read_back_as_written_and_none_where_nobody_reported(redis: Redis) -> None:
    stats = RelayStats(4, 1700000000.25, 0.0123, 10, 7, 3, 1e-05, 4321, 99)
    await relay_stats.write(redis, TAG, stats)
    assert await relay_stats.read(redis, [TAG, TAG + "-nobody"]) == [stats, None]


async def test_a_figure_an_older_relay_did_not_write_reads_as_zero(redis: Redis) -> None:
    await redis.hset(keys.relay_stats(TAG), mapping={"epoch": 2, "heartbeat": 1700000000.5, "lag_seconds": 0.25})
    (read,) = await relay_stats.read(redis, [TAG])
    assert read == RelayStats(2, 1700000000.5, 0.25, 0, 0, 0, 0.0, 0, 0)
