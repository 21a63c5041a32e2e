"""The demo's seed on a database it seeded before: a restart re-keys no cluster, so a tool given a key by the
first run keeps working, and the team's activity gets no rotate_key row per restart."""

from __future__ import annotations

from collections.abc import Iterator

import asyncpg
import pytest

from gateway.credentials import hash_key
from gateway.demo import take_up
from gateway.seed import seed_demo
from gateway.sim.commands import act
from gateway.sim.run import Simulation
from gateway.store import clusters

from ..conftest import create_database, drop_database

SECRET = "a demo secret of thirty-two characters or more"


@pytest.fixture
def fresh_database(pg_admin: str) -> Iterator[str]:
    url = create_database(pg_admin)
    try:
        yield url
    finally:
        drop_database(pg_admin, url)


async def _rotations(url: str, team_id: int) -> int:
    conn = await asyncpg.connect(url)
    try:
        n: int = await conn.fetchval(
            "select count(*) from activity where team_id = $1 and action = 'rotate_key'", team_id
        )
        return n
    finally:
        await conn.close()


async def test_a_second_seed_keeps_every_clusters_key_and_records_no_rotation(fresh_database: str) -> None:
    first = await seed_demo(fresh_database, SECRET)
    assert sorted(first.cluster_keys) == first.cluster_ids  # each new cluster got its key once
    assert await _rotations(fresh_database, first.team_id) == len(first.cluster_ids)
    second = await seed_demo(fresh_database, SECRET)
    assert second.cluster_keys == first.cluster_keys
    assert second.kept_keys == []
    assert await _rotations(fresh_database, first.team_id) == len(first.cluster_ids)  # nothing re-keyed


async def test_a_key_issued_since_stays_the_clusters_and_the_demo_does_not_act_as_it(fresh_database: str) -> None:
    """An owner re-keyed gpu-1 and gave the key to a tool; a restart (even under another secret) keeps that key."""
    first = await seed_demo(fresh_database, SECRET)
    rekeyed = first.cluster_ids[0]
    conn = await asyncpg.connect(fresh_database)
    try:
        await clusters.set_key_hash(conn, rekeyed, hash_key("c1.the key a person issued"))
    finally:
        await conn.close()
    second = await seed_demo(fresh_database, SECRET)
    assert second.kept_keys == [rekeyed]
    assert rekeyed not in second.cluster_keys
    assert {c: second.cluster_keys[c] for c in first.cluster_ids[1:]} == {
        c: first.cluster_keys[c] for c in first.cluster_ids[1:]
    }
    conn = await asyncpg.connect(fresh_database)
    try:
        assert (await clusters.key_hashes(conn, [rekeyed]))[rekeyed] == hash_key("c1.the key a person issued")
    finally:
        await conn.close()
    other = await seed_demo(fresh_database, SECRET + " but another")
    assert sorted(other.kept_keys) == first.cluster_ids  # another secret re-keys nothing either


async def test_a_restarted_demos_clusters_retry_a_failure_of_the_last_run(fresh_database: str) -> None:
    """What the demo lists after a restart, its clusters still know: Retry Failed Jobs on a failure and a preemption
    of the last run runs each again as its next attempt, as it did before the restart (the restarted clusters
    answered "Queued 0 of 4 failed job(s) for retry")."""
    first = await seed_demo(fresh_database, SECRET)
    gpu1 = first.cluster_ids[0]
    conn = await asyncpg.connect(fresh_database)
    try:
        failed, preempted = [
            await conn.fetchval(
                "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, status, attempts)"
                " values ($1, $2, $3, 'analysis', 'RDF', $4, 1) returning id",
                first.team_id,
                first.trajectory_ids[0],
                gpu1,
                status,
            )
            for status in ("failed", "preempted")
        ]
    finally:
        await conn.close()
    second = await seed_demo(fresh_database, SECRET)
    simulation = Simulation("http://127.0.0.1:1", [second.cluster_keys[gpu1]], speed=5)
    take_up(simulation, second)
    (cluster,) = simulation.clusters
    assert act(cluster, "retry_failed", [failed]) == [failed]
    assert act(cluster, "retry_preempted", [preempted]) == [preempted]
    assert [(cluster.jobs[i].status, cluster.jobs[i].attempt) for i in (failed, preempted)] == [("retrying", 2)] * 2
