"""The submission lifecycle at work on a live node: a cluster's staging reports checked against the transition
table, Retry Sync from a task, and the diagram served from the same table."""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.core.lifecycle import TRANSITIONS
from gateway.sim.cluster import SimCluster
from gateway.web.http.headers import CONTENT_SECURITY_POLICY
from gateway.web.team.lifecycle import lifecycle_svg
from tests.conftest import Stack
from tests.integration.conftest import Team


@pytest.fixture
async def cluster(stack: Stack, team: Team) -> AsyncIterator[SimCluster]:
    c = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await c.start()
    yield c
    await c.stop()


async def report(stack: Stack, team: Team, submission_id: int, **body: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        return await client.post(
            f"/api/ingest/submissions/{submission_id}",
            json=body,
            headers={"Authorization": f"Bearer {team.cluster_key}"},
        )


async def act(stack: Stack, team: Team, **body: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=stack.nodes[1].http) as client:
        response = await client.post(
            "/api/submissions/actions", json=body, headers={"Authorization": f"Bearer {team.token}"}
        )
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_a_cluster_moves_a_submissions_data_forward_and_a_move_back_is_refused_naming_both(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    sid = await cluster.create_submission(title="Upload of 3 frames", staging="upload_pending")
    for staging in ("uploading", "uploading", "syncing"):  # the same report twice, and a step not seen (sync_pending)
        assert (await report(stack, team, sid, staging=staging)).status_code == 204
    before = await pool.fetchrow("select staging, version, downloaded_at from submissions where id = $1", sid)
    refused = await report(stack, team, sid, staging="uploading", downloaded=True)
    assert refused.status_code == 409
    assert refused.json() == {
        "error": "conflict",
        "message": f"staging: submission {sid} cannot move from syncing to uploading;"
        " from syncing it moves to sync_failed or ready",
    }
    after = await pool.fetchrow("select staging, version, downloaded_at from submissions where id = $1", sid)
    assert after == before  # all or nothing: not even `downloaded` was written
    for staging in ("sync_failed", "syncing", "ready"):
        assert (await report(stack, team, sid, staging=staging)).status_code == 204
    back = await report(stack, team, sid, staging="sync_pending")
    assert (back.status_code, back.json()["message"]) == (
        409,
        f"staging: submission {sid} cannot move from ready to sync_pending; its data is in place",
    )
    assert (await report(stack, team, sid, downloaded=True)).status_code == 204  # no staging named: no move checked
    assert await pool.fetchval("select staging from submissions where id = $1", sid) == "ready"


async def test_retry_sync_on_a_task_syncs_its_submission_again(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    sid = await cluster.create_submission(
        title="Render of frames 1-2", trajectory_id=team.trajectory_id, staging="sync_failed"
    )
    ready = await cluster.create_submission(title="Render of frame 3", trajectory_id=team.trajectory_id)
    (task, other) = await cluster.submit(
        [
            {"trajectory_id": team.trajectory_id, "kind": "analysis", "name": "a", "frame": 1, "submission_id": sid},
            {"trajectory_id": team.trajectory_id, "kind": "analysis", "name": "a", "frame": 3, "submission_id": ready},
        ]
    )
    # A task of a submission whose sync did not fail: nothing to retry.
    assert await act(stack, team, action="retry_sync", tasks=[other]) == {
        "message": "No submissions whose sync failed",
        "acted": 0,
        "unconfirmed": [],
        "level": "info",
    }
    retried = cluster.sync_failed[sid] = asyncio.Event()  # this cluster failed to sync it: it is the one to confirm
    assert await act(stack, team, action="retry_sync", tasks=[task]) == {
        "message": "Retrying sync of 1 submission(s)",
        "acted": 1,
        "unconfirmed": [],
        "level": "success",
    }
    assert retried.is_set()
    assert await pool.fetchval("select staging from submissions where id = $1", sid) == "syncing"
    assert await pool.fetchval("select staging from submissions where id = $1", ready) == "ready"


async def test_the_lifecycle_diagram_is_served_as_drawn_from_the_table(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        response = await client.get("/submissions/lifecycle.svg")  # no credentials: it names nobody's data
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/svg+xml"
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert response.text == lifecycle_svg()
    moves = {
        (g.get("data-source"), g.get("data-target"))
        for g in ET.fromstring(response.text).iter("{http://www.w3.org/2000/svg}g")
        if g.get("class") == "transition"
    }
    assert moves == {(t.source, t.target) for t in TRANSITIONS}
