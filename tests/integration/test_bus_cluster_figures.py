"""gateway.bus.cluster_figures against a real Redis: each cluster's newest figures, per team."""

from __future__ import annotations

import pytest
from redis.asyncio import Redis

from gateway.bus import cluster_figures
from gateway.core.team import ClusterFigures

TEAM = 900_002  # no real team: a stack running beside these tests never sees it (another database, too)


@pytest.fixture
def redis(scratch_redis: Redis) -> Redis:
    return scratch_redis


def figures(cluster_id: int, cpu: float) -> ClusterFigures:
    return ClusterFigures(id=cluster_id, name=f"c{cluster_id}", cpu=cpu, memory=1, disk=2, network=3, at=100.0)


async def test_a_clusters_newest_figures_replace_its_previous_ones(redis: Redis) -> None:
    assert await cluster_figures.read(redis, TEAM) == []
    await cluster_figures.report(redis, TEAM, figures(1, 10))
    await cluster_figures.report(redis, TEAM, figures(2, 20))
    await cluster_figures.report(redis, TEAM, figures(1, 30))
    assert sorted(await cluster_figures.read(redis, TEAM), key=lambda f: f.id) == [figures(1, 30), figures(2, 20)]
    assert await cluster_figures.teams(redis) == [TEAM]
