"""The ingest API under hostile input, against a real gateway: never a 500, never a partial write."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.web.auth import new_cluster_key
from tests.conftest import Stack

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=20)
reports = st.fixed_dictionaries(
    {},
    optional={
        "id": values | st.integers(min_value=1, max_value=10**6),
        "status": st.sampled_from(["queued", "running", "completed", "failed", "exploded", "holding", "preempted"]) | values,
        "attempt": values | st.integers(min_value=-5, max_value=5),
        "trajectory_id": values | st.integers(min_value=1, max_value=10**6),
        "kind": st.sampled_from(["preprocess", "analysis", "nope"]) | values,
        "name": values,
        "frame": values,
        "error": values,
    },
)
bodies = st.one_of(
    values,
    st.fixed_dictionaries({"jobs": st.lists(reports, max_size=5)}),
    st.fixed_dictionaries({"jobs": values}),
    st.binary(max_size=300),
)


def _cluster(stack: Stack) -> tuple[str, int]:
    async def make() -> tuple[str, int]:
        conn = await asyncpg.connect(stack.database_url)
        try:
            team = await conn.fetchval("insert into teams (name) values ('fuzz') returning id")
            cluster = await conn.fetchval("insert into clusters (team_id, name) values ($1, 'fuzz') returning id", team)
            key, key_hash = new_cluster_key(cluster)
            await conn.execute("update clusters set key_hash = $2 where id = $1", cluster, key_hash)
            return key, cluster
        finally:
            await conn.close()

    return asyncio.run(make())


def _jobs_of(stack: Stack, cluster: int) -> int:
    async def count() -> int:
        conn = await asyncpg.connect(stack.database_url)
        try:
            return int(await conn.fetchval("select count(*) from jobs where cluster_id = $1", cluster))
        finally:
            await conn.close()

    return asyncio.run(count())


def test_ingest_never_errors_on_bad_input_and_writes_nothing_it_refuses(stack: Stack) -> None:
    key, cluster = _cluster(stack)
    client = httpx.Client(base_url=stack.nodes[0].http, headers={"Authorization": f"Bearer {key}"}, timeout=10)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(bodies)
    def check(body: object) -> None:
        before = _jobs_of(stack, cluster)
        if isinstance(body, bytes):
            response = client.post("/api/ingest/jobs", content=body, headers={"content-type": "application/json"})
        else:  # NaN and Infinity go out as Python writes them: not JSON, so a 400
            response = client.post("/api/ingest/jobs", content=json.dumps(body), headers={"content-type": "application/json"})
        assert response.status_code in (200, 400, 413, 422), (response.status_code, response.text)
        assert "error" in response.json() or response.status_code == 200
        if response.status_code != 200:
            assert _jobs_of(stack, cluster) == before

    try:
        check()
    finally:
        client.close()
