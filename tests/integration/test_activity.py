"""Who did what: every action on jobs and submissions, membership change and key rotation is in the team's activity,
read by its owners and admins only, and kept GATEWAY_ACTIVITY_DAYS."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.sim.cluster import SimCluster
from gateway.store import activity, tenants
from gateway.store.clusters import set_key_hash
from gateway.web.people.auth import new_cluster_key
from tests.conftest import Stack
from tests.integration.conftest import Team


@pytest.fixture
async def cluster(stack: Stack, team: Team) -> AsyncIterator[SimCluster]:
    c = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await c.start()
    yield c
    await c.stop()


async def as_owner(pool: asyncpg.Pool, team: Team) -> None:
    await pool.execute(
        "update memberships set role = 'owner' where team_id = $1 and user_id = $2", team.id, team.user_id
    )


async def get(stack: Stack, team: Team, path: str, **params: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        return await client.get(path, params=params, headers={"Authorization": f"Bearer {team.token}"})


async def post(stack: Stack, team: Team, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        response = await client.post(path, json=body, headers={"Authorization": f"Bearer {team.token}"})
        assert response.status_code == 200, response.text
        return response.json()


async def entries(stack: Stack, team: Team, **params: Any) -> list[dict[str, Any]]:
    response = await get(stack, team, f"/api/teams/{team.id}/activity", **params)
    assert response.status_code == 200, response.text
    return response.json()["entries"]


async def submit(cluster: SimCluster, team: Team, n: int) -> list[int]:
    return await cluster.submit(
        [
            {"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "preprocess", "frame": i}
            for i in range(n)
        ]
    )


async def test_every_action_on_jobs_and_submissions_is_recorded_with_who_what_how_many_and_where(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    await as_owner(pool, team)
    name = await pool.fetchval("select name from users where id = $1", team.user_id)
    ids = await submit(cluster, team, 3)
    sid = await pool.fetchval("select submission_id from jobs where id = $1", ids[0])
    for action in ("hold", "unhold", "kill", "retry_failed"):
        await post(stack, team, "/api/submissions/actions", {"action": action, "submissions": [sid]})
    await post(stack, team, "/api/submissions/actions", {"action": "priority", "submissions": [sid], "priority": 5})
    await post(stack, team, "/api/submissions/actions", {"action": "reviewed", "submissions": [sid]})
    await post(stack, team, f"/api/trajectories/{team.trajectory_id}/remove-running")
    await post(stack, team, f"/api/trajectories/{team.trajectory_id}/retry-failed")
    seen = [
        (e["actor"], e["user_id"], e["action"], e["count"], e["clusters"], e["scope"])
        for e in await entries(stack, team)
    ]
    scope = f"submission:{sid}"
    trajectory = f"trajectory:{team.trajectory_id}"
    assert seen == [
        (name, team.user_id, "retry_failed", 0, [], trajectory),  # newest first; nothing failed by then
        (name, team.user_id, "remove_running", 3, ["gpu-1"], trajectory),
        (name, team.user_id, "reviewed", 1, [], scope),
        (name, team.user_id, "priority", 1, [], scope),
        (name, team.user_id, "retry_failed", 3, ["gpu-1"], scope),
        (name, team.user_id, "kill", 3, ["gpu-1"], scope),
        (name, team.user_id, "unhold", 3, ["gpu-1"], scope),
        (name, team.user_id, "hold", 3, ["gpu-1"], scope),
    ]
    assert [e["action"] for e in await entries(stack, team, action="kill")] == ["kill"]
    assert await entries(stack, team, person=team.user_id + 1000000) == []
    first, second = (await get(stack, team, f"/api/teams/{team.id}/activity", limit=5)).json(), None
    assert len(first["entries"]) == 5 and first["next"]
    second = (await get(stack, team, f"/api/teams/{team.id}/activity", limit=5, after=first["next"])).json()
    assert [e["action"] for e in first["entries"] + second["entries"]] == [s[2] for s in seen]
    assert second["next"] is None
    exported = await get(stack, team, f"/api/teams/{team.id}/activity.csv", action="kill")
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [(r["actor"], r["action"], r["count"], r["clusters"], r["scope"]) for r in rows] == [
        (name, "kill", "3", "gpu-1", scope)
    ]


async def test_membership_changes_and_key_rotations_are_recorded_by_the_store_functions_that_make_them(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    await as_owner(pool, team)
    async with pool.acquire() as db:
        grace, _ = await tenants.create_user(db, "Grace Hopper")
        assert await tenants.set_member(db, team.id, grace, "member") == "added"
        assert await tenants.set_member(db, team.id, grace, "member") == "unchanged"  # nothing changed: no row
        assert await tenants.set_member(db, team.id, grace, "admin", by=team.user_id) == "changed"
        assert await tenants.remove_member(db, team.id, grace)
        assert not await tenants.remove_member(db, team.id, grace)  # nothing removed: no row
        _, key_hash = new_cluster_key(team.cluster_id)
        assert await set_key_hash(db, team.cluster_id, key_hash)
    name = await pool.fetchval("select name from users where id = $1", team.user_id)
    seen = [(e["actor"], e["user_id"], e["action"], e["clusters"], e["scope"]) for e in await entries(stack, team)]
    assert seen == [
        (activity.CLI, None, "rotate_key", ["gpu-1"], ""),
        (activity.CLI, None, "remove_member", [], f"user:{grace}"),
        (name, team.user_id, "change_role", [], f"user:{grace} admin"),
        (activity.CLI, None, "add_member", [], f"user:{grace} member"),
    ]


async def test_only_owners_and_admins_read_the_activity(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    for path in (f"/api/teams/{team.id}/activity", f"/api/teams/{team.id}/activity.csv"):
        refused = await get(stack, team, path)  # the test team's user is a member
        assert refused.status_code == 403
        assert refused.json()["message"] == "only the team's owners and admins may read its activity (you are a member)"
    for role in ("admin", "owner"):
        await pool.execute(
            "update memberships set role = $3 where team_id = $1 and user_id = $2", team.id, team.user_id, role
        )
        assert (await get(stack, team, f"/api/teams/{team.id}/activity")).status_code == 200
    assert (await get(stack, team, f"/api/teams/{team.id}/activity", since="yesterday")).status_code == 422
    assert (await get(stack, team, f"/api/teams/{team.id}/activity", limit="0")).status_code == 422


async def test_activity_past_its_retention_is_pruned(pool: asyncpg.Pool, team: Team) -> None:
    old = await activity.record(pool, team.id, team.user_id, "kill", 3)
    recent = await activity.record(pool, team.id, team.user_id, "hold", 3)
    await pool.execute("update activity set at = now() - interval '91 days' where id = $1", old)
    await activity.prune(pool, 90)
    left = await pool.fetch("select id from activity where id = any($1::bigint[])", [old, recent])
    assert [r["id"] for r in left] == [recent]


async def test_an_analysis_s_retry_and_deletion_are_recorded(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    await as_owner(pool, team)
    ptm = await cluster.create_analysis(team.trajectory_id, "Polyhedral Template Matching")
    jobs = await cluster.submit(
        [
            {"trajectory_id": team.trajectory_id, "kind": "analysis", "name": "PTM", "analysis_id": ptm, "frame": f}
            for f in range(2)
        ]
    )
    for job_id in jobs:
        cluster.jobs[job_id].status = "failed"
        cluster._report(cluster.jobs[job_id], error="boom")
    await cluster.flushed()
    await cluster.flushed()
    assert (await post(stack, team, f"/api/analyses/{ptm}/retry-failed"))["acted"] == 2
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        deleted = await client.delete(f"/api/analyses/{ptm}", headers={"Authorization": f"Bearer {team.token}"})
    assert deleted.status_code == 200, deleted.text
    seen = [(e["action"], e["count"], e["clusters"], e["scope"]) for e in await entries(stack, team)]
    assert seen[0][0] == "delete_analysis" and seen[0][3] == f"analysis:{ptm}"
    assert ("remove_running", 2, ["gpu-1"], f"analysis:{ptm}") in seen[1:]  # its retried jobs stopped first
    assert seen[-1] == ("retry_failed", 2, ["gpu-1"], f"analysis_frames:{ptm}")
