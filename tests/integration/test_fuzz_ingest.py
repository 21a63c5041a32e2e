"""The ingest API under hostile input, against a real gateway: never a 500, never a partial write."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import asyncpg
import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.web.people.auth import new_cluster_key
from tests.conftest import Stack

# What PostgreSQL cannot take: ids past a bigint (asyncpg cannot send them), NUL in text.
huge_ids = st.sampled_from([2**63 - 1, 2**63, 2**64, -(2**63) - 1]) | st.integers(min_value=2**63, max_value=2**200)
nul_texts = st.builds(lambda a, b: f"{a}\x00{b}", st.text(max_size=10), st.text(max_size=10))
scalars = st.none() | st.booleans() | st.integers() | huge_ids | st.floats() | st.text(max_size=30) | nul_texts
values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4), max_leaves=20
)
texts = values | st.text(min_size=1, max_size=30) | nul_texts


@dataclass
class Rows:
    """The fuzzing cluster's own rows and another team's: the ids worth naming besides random ones."""

    key: str
    cluster: int
    team: int
    known: list[int]  # our trajectory, analysis and submission; theirs; their user and job


def _ids(rows: Rows) -> st.SearchStrategy[object]:
    return values | st.integers(min_value=1, max_value=10**6) | huge_ids | st.sampled_from(rows.known)


def _bodies(rows: Rows) -> st.SearchStrategy[object]:
    ids = _ids(rows)
    reports = st.fixed_dictionaries(
        {},
        optional={
            "id": ids,
            "status": st.sampled_from(["queued", "running", "completed", "failed", "exploded", "holding", "preempted"])
            | values,
            "attempt": values | st.integers(min_value=-5, max_value=5),
            "trajectory_id": ids,
            "analysis_id": ids,
            "submission_id": ids,
            "kind": st.sampled_from(["preprocess", "analysis", "nope"]) | values,
            "name": texts,
            "frame": values,
            "timestep": values | st.floats(),
            "error": texts,
        },
    )
    return st.one_of(
        values,
        st.fixed_dictionaries({"jobs": st.lists(reports, max_size=5)}),
        st.fixed_dictionaries({"jobs": values}),
        st.binary(max_size=300),
    )


def _other_routes(rows: Rows) -> st.SearchStrategy[tuple[str, object]]:
    """The rest of the ingest API: a path and a body that is close to right."""
    ids = _ids(rows)
    staging = st.sampled_from(["ready", "syncing", "sync_failed", "nope"]) | values
    return st.one_of(
        st.tuples(st.just("/api/ingest/trajectories"), st.fixed_dictionaries({}, optional={"name": texts})),
        st.tuples(
            st.just("/api/ingest/analyses"), st.fixed_dictionaries({}, optional={"trajectory_id": ids, "plugin": texts})
        ),
        st.tuples(
            st.just("/api/ingest/submissions"),
            st.fixed_dictionaries(
                {},
                optional={
                    "title": texts,
                    "project": texts,
                    "instance_type": texts,
                    "trajectory_id": ids,
                    "user_id": ids,
                    "priority": values,
                    "cores": values,
                    "staging": staging,
                },
            ),
        ),
        st.tuples(
            st.builds(
                lambda i: f"/api/ingest/submissions/{i}",
                st.integers(min_value=0) | huge_ids.filter(lambda i: i >= 0) | st.sampled_from(rows.known),
            ),
            st.fixed_dictionaries({}, optional={"staging": staging, "downloaded": values}),
        ),
        st.tuples(
            st.just("/api/ingest/metrics"),
            st.fixed_dictionaries(
                {},
                optional={
                    "cpu": values | st.floats(),
                    "memory": values,
                    "disk": values,
                    "network": values | st.floats(),
                },
            ),
        ),
        st.tuples(
            st.sampled_from(["/api/ingest/trajectories", "/api/ingest/analyses", "/api/ingest/submissions"]), values
        ),
    )


def _rows(stack: Stack) -> Rows:
    async def make() -> Rows:
        conn = await asyncpg.connect(stack.database_url)
        try:
            known = []
            for name in ("fuzz", "fuzz-other"):
                team = await conn.fetchval("insert into teams (name) values ($1) returning id", name)
                cluster = await conn.fetchval(
                    "insert into clusters (team_id, name) values ($1, 'fuzz') returning id", team
                )
                trajectory = await conn.fetchval(
                    "insert into trajectories (team_id, name) values ($1, 'fuzz') returning id", team
                )
                analysis = await conn.fetchval(
                    "insert into analyses (trajectory_id, plugin) values ($1, 'rdf') returning id", trajectory
                )
                job = await conn.fetchval(
                    "insert into jobs (team_id, trajectory_id, cluster_id, kind, name)"
                    " values ($1, $2, $3, 'preprocess', 'fuzz') returning id",
                    team,
                    trajectory,
                    cluster,
                )
                submission = await conn.fetchval("select submission_id from jobs where id = $1", job)
                user = await conn.fetchval("insert into users (name) values ('fuzz') returning id")
                await conn.execute("insert into memberships values ($1, $2)", team, user)
                known += [trajectory, analysis, submission, job, user]
                if name == "fuzz":
                    key, key_hash = new_cluster_key(cluster)
                    await conn.execute("update clusters set key_hash = $2 where id = $1", cluster, key_hash)
                    ours = (key, cluster, team)
            return Rows(*ours, known)
        finally:
            await conn.close()

    return asyncio.run(make())


def _written(stack: Stack, rows: Rows) -> tuple[object, ...]:
    """What the fuzzing cluster's team holds: a refused request must leave all of it as it was."""

    async def read() -> tuple[object, ...]:
        conn = await asyncpg.connect(stack.database_url)
        try:
            return (
                await conn.fetchval("select count(*) from jobs where cluster_id = $1", rows.cluster),
                await conn.fetchval("select count(*) from trajectories where team_id = $1", rows.team),
                await conn.fetchval(
                    "select count(*) from analyses a join trajectories t on t.id = a.trajectory_id"
                    " where t.team_id = $1",
                    rows.team,
                ),
                tuple(
                    await conn.fetch("select id, version from submissions where team_id = $1 order by id", rows.team)
                ),
            )
        finally:
            await conn.close()

    return asyncio.run(read())


def _post(client: httpx.Client, path: str, body: object) -> httpx.Response:
    # NaN and Infinity go out as Python writes them: not JSON, so a 400.
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(path, content=content, headers={"content-type": "application/json"})


def _refused_cleanly(response: httpx.Response) -> bool:
    # 409: a staging move the submission's lifecycle does not make (gateway.core.lifecycle).
    assert response.status_code in (200, 204, 400, 404, 409, 413, 422), (response.status_code, response.text)
    assert response.status_code in (200, 204) or "error" in response.json()
    return response.status_code not in (200, 204)


def test_ingest_never_errors_on_bad_input_and_writes_nothing_it_refuses(stack: Stack) -> None:
    rows = _rows(stack)
    client = httpx.Client(base_url=stack.nodes[0].http, headers={"Authorization": f"Bearer {rows.key}"}, timeout=10)

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(_bodies(rows))
    def check(body: object) -> None:
        before = _written(stack, rows)
        if _refused_cleanly(_post(client, "/api/ingest/jobs", body)):
            assert _written(stack, rows) == before

    try:
        check()
    finally:
        client.close()


def test_the_rest_of_the_ingest_api_never_errors_on_bad_input(stack: Stack) -> None:
    rows = _rows(stack)
    client = httpx.Client(base_url=stack.nodes[0].http, headers={"Authorization": f"Bearer {rows.key}"}, timeout=10)

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(_other_routes(rows))
    def check(request: tuple[str, object]) -> None:
        path, body = request
        before = _written(stack, rows)
        if _refused_cleanly(_post(client, path, body)):
            assert _written(stack, rows) == before

    try:
        check()
    finally:
        client.close()
