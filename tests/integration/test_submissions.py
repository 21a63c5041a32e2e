"""The Submissions page's data and actions: live rows with derived statuses, actions through the clusters."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.sim.cluster import SimCluster
from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs


@pytest.fixture
async def cluster(stack: Stack, team: Team) -> AsyncIterator[SimCluster]:
    c = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await c.start()
    yield c
    await c.stop()


def rows(f: Follower, team: Team) -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for m in f.messages:
        if m.get("channel") == f"team:{team.id}":
            for r in m.get("submissions") or ():
                out[r["id"]] = r
    return out


async def act(stack: Stack, team: Team, **body: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=stack.nodes[1].http) as client:
        response = await client.post(
            "/api/submissions/actions", json=body, headers={"Authorization": f"Bearer {team.token}"}
        )
        assert response.status_code == 200, response.text
        return response.json()


async def tasks(cluster: SimCluster, team: Team, n: int, kind: str = "preprocess") -> tuple[list[int], int]:
    ids = await cluster.submit(
        [{"trajectory_id": team.trajectory_id, "kind": kind, "name": kind, "frame": i} for i in range(n)]
    )
    return ids, 0


async def submission_of(pool: asyncpg.Pool, job_id: int) -> int:
    return await pool.fetchval("select submission_id from jobs where id = $1", job_id)


async def test_a_plain_insert_gets_a_derived_submission_streamed_live(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(f"team:{team.id}")
        ids = await insert_jobs(pool, team, 3)
        sid = await submission_of(pool, ids[0])
        await f.wait_for(lambda f: rows(f, team).get(sid, {}).get("tasks") == 3)
        await pool.execute("update jobs set status = 'running' where id = $1", ids[0])
        await f.wait_for(lambda f: rows(f, team)[sid]["status"] == "running")
        await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
        await f.wait_for(lambda f: rows(f, team)[sid]["status"] == "success")
        row = rows(f, team)[sid]
        assert row["title"].endswith("— upload") and row["counts"]["completed"] == 3 and row["avg_frame"] is not None
    async with httpx.AsyncClient(base_url=stack.nodes[1].http) as client:  # a fresh page reads its window
        response = await client.get(
            f"/api/teams/{team.id}/submissions", headers={"Authorization": f"Bearer {team.token}"}
        )
    assert [(r["id"], r["status"]) for r in response.json()["rows"]] == [(sid, "success")]


async def test_hold_then_unhold(stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster) -> None:
    ids, _ = await tasks(cluster, team, 4)
    sid = await submission_of(pool, ids[0])
    assert (await act(stack, team, action="hold", submissions=[sid]))["message"] == "Held 4 task(s)"
    assert {r["status"] for r in await pool.fetch("select status from jobs where submission_id = $1", sid)} == {
        "holding"
    }
    assert await pool.fetchval("select held from submissions where id = $1", sid) is True
    assert (await act(stack, team, action="unhold", submissions=[sid]))["message"] == "Released 4 task(s)"
    # The cluster reports each action it carried out: its report of the hold may land after the release was
    # written (as on a busy machine), and its report of the release follows; the jobs end queued.
    deadline = asyncio.get_running_loop().time() + 30
    while {r["status"] for r in await pool.fetch("select status from jobs where submission_id = $1", sid)} != {
        "queued"
    }:
        assert asyncio.get_running_loop().time() < deadline, "the released tasks never went back to queued"
        await asyncio.sleep(0.1)


async def test_kill_fails_every_task_with_a_clear_error(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    ids, _ = await tasks(cluster, team, 3)
    sid = await submission_of(pool, ids[0])
    assert (await act(stack, team, action="kill", submissions=[sid]))["message"] == "Killed 3 task(s)"
    assert {
        (r["status"], r["error"])
        for r in await pool.fetch("select status, error from jobs where submission_id = $1", sid)
    } == {("failed", "Killed by a user")}
    again = await act(stack, team, action="retry_failed", submissions=[sid])
    assert again["message"] == "Queued 3 failed task(s) for retry"
    assert {
        (r["status"], r["attempts"])
        for r in await pool.fetch("select status, attempts from jobs where submission_id = $1", sid)
    } == {("retrying", 2)}


async def test_retry_preempted_takes_only_preempted_tasks(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    ids, _ = await tasks(cluster, team, 3)
    sid = await submission_of(pool, ids[0])
    await pool.execute("update jobs set status = 'preempted' where id = $1", ids[0])
    await pool.execute("update jobs set status = 'failed' where id = $1", ids[1])
    for job_id, status in ((ids[0], "preempted"), (ids[1], "failed")):
        cluster.jobs[job_id].status = status
    assert (await act(stack, team, action="retry_failed", submissions=[sid]))["acted"] == 1
    result = await act(stack, team, action="retry_preempted", submissions=[sid])
    assert result["message"] == "Queued 1 preempted task(s) for retry"
    assert await pool.fetchval("select status from jobs where id = $1", ids[0]) == "retrying"


async def test_actions_on_several_submissions_and_on_tasks(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    uploads, _ = await tasks(cluster, team, 2)
    analyses, _ = await tasks(cluster, team, 2, kind="analysis")
    a, b = await submission_of(pool, uploads[0]), await submission_of(pool, analyses[0])
    assert a != b
    assert (await act(stack, team, action="hold", submissions=[a, b]))["message"] == "Held 4 task(s)"
    assert (await act(stack, team, action="unhold", tasks=[uploads[0]]))["message"] == "Released 1 task(s)"
    assert (await act(stack, team, action="reviewed", submissions=[a, b]))[
        "message"
    ] == "Marked 2 submission(s) reviewed"
    edited = await act(
        stack, team, action="instance_type", submissions=[b], instance_type="gpu-large", cores=32, memory_gb=128
    )
    assert edited["message"] == "Instance type set to gpu-large on 1 submission(s)"
    row = await pool.fetchrow("select instance_type, cores, memory_gb, reviewed from submissions where id = $1", b)
    assert tuple(row) == ("gpu-large", 32, 128, True)


async def test_an_instance_type_leaves_a_finished_submission_as_it_ran(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    """Edit / Instance Type rewrote CORES and MEMORY of a submission that had finished (56/56): it affects only
    tasks not yet run, so a finished one keeps what its tasks ran on, and the toast says why."""
    done, _ = await tasks(cluster, team, 2)
    sid = await submission_of(pool, done[0])
    await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", done)
    before = tuple(await pool.fetchrow("select instance_type, cores, memory_gb from submissions where id = $1", sid))
    result = await act(stack, team, action="instance_type", submissions=[sid], instance_type="gpu-large")
    assert result["message"] == (
        "Instance type set to gpu-large on 0 of 1 submission(s); a finished submission keeps the instance type it ran on"
    )
    after = tuple(await pool.fetchrow("select instance_type, cores, memory_gb from submissions where id = $1", sid))
    assert after == before


async def test_a_priority_change_reorders_what_the_cluster_runs_next(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    uploads, _ = await tasks(cluster, team, 3)
    analyses, _ = await tasks(cluster, team, 3, kind="analysis")
    assert cluster.queued_order()[:3] == uploads  # first come, first served
    sid = await submission_of(pool, analyses[0])
    result = await act(stack, team, action="priority", submissions=[sid], priority=10)
    assert result["message"] == "Priority set to 10 on 1 submission(s)"
    assert cluster.queued_order()[:3] == analyses  # higher priority runs first now
    assert await pool.fetchval("select priority from submissions where id = $1", sid) == 10


async def test_retry_sync_restarts_a_failed_sync(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    ids, _ = await tasks(cluster, team, 1)
    sid = await submission_of(pool, ids[0])
    await pool.execute("update submissions set staging = 'sync_failed' where id = $1", sid)
    cluster.sync_failed[sid] = asyncio.Event()  # this cluster's sync of it failed: it is the one to confirm
    assert (await act(stack, team, action="retry_sync", submissions=[sid]))[
        "message"
    ] == "Retrying sync of 1 submission(s)"
    assert await pool.fetchval("select staging from submissions where id = $1", sid) == "syncing"


async def test_another_teams_submissions_are_refused(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    from tests.integration.conftest import make_team

    other = await make_team(pool, stack.secret)
    (job_id,) = await insert_jobs(pool, other, 1)
    sid = await submission_of(pool, job_id)
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        response = await client.post(
            "/api/submissions/actions",
            json={"action": "kill", "submissions": [sid]},
            headers={"Authorization": f"Bearer {team.token}"},
        )
    assert response.status_code == 403
    assert await pool.fetchval("select status from jobs where id = $1", job_id) == "queued"


async def silent_cluster(stack: Stack, pool: asyncpg.Pool, team: Team) -> SimCluster:
    """A second cluster of the team, gpu-2, that acts but never confirms."""
    from tests.integration.test_actions import add_cluster

    c = SimCluster(
        stack.nodes[0].http,
        await add_cluster(pool, team, "gpu-2"),
        workers=0,
        report_metrics=False,
        confirm=False,
    )
    await c.start()
    return c


async def act_raw(stack: Stack, team: Team, **body: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        return await client.post(
            "/api/submissions/actions", json=body, headers={"Authorization": f"Bearer {team.token}"}
        )


async def test_every_task_action_names_a_cluster_that_does_not_confirm_and_its_reports_still_move_its_tasks(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    gpu2 = await silent_cluster(stack, pool, team)
    try:
        mine = await cluster.submit(
            [{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "p", "frame": i} for i in range(2)]
        )
        theirs = await gpu2.submit(
            [{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "p", "frame": i} for i in range(2)]
        )
        tasks = mine + theirs
        for action, before, after, toast in (
            ("hold", "queued", "holding", "Held 2 task(s)"),
            ("unhold", "holding", "queued", "Released 2 task(s)"),
            ("kill", "queued", "failed", "Killed 2 task(s)"),
            ("retry_failed", "failed", "retrying", "Queued 2 failed task(s) for retry"),
            ("retry_preempted", "preempted", "retrying", "Queued 2 preempted task(s) for retry"),
            ("retry", "completed", "retrying", "Queued 2 task(s) for retry"),
        ):
            await pool.execute("update jobs set status = $2 where id = any($1::bigint[])", tasks, before)
            for c, ids in ((cluster, mine), (gpu2, theirs)):
                for i in ids:
                    c.jobs[i].status = before
            result = await act(stack, team, action=action, tasks=tasks)
            assert {k: result[k] for k in ("message", "acted", "unconfirmed", "level")} == {
                "message": f"{toast}; 2 on gpu-2 not confirmed yet",
                "acted": 2,
                "unconfirmed": ["gpu-2"],
                "level": "warning",
            }, action
            # The reply never came, but gpu-2 did act and reports its tasks as any cluster does: nothing stays
            # as it was (the test's next step must start from the reports landed).
            await gpu2.flushed()
            statuses = await pool.fetch("select status, attempts from jobs where id = any($1::bigint[])", theirs)
            assert {r["status"] for r in statuses} == {after}, action
            assert [r["attempts"] for r in statuses] == [gpu2.jobs[i].attempt for i in theirs], action
    finally:
        await gpu2.stop()


async def test_retry_sync_asks_the_cluster_staging_each_submission_and_names_it_when_silent(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    gpu2 = await silent_cluster(stack, pool, team)
    try:
        theirs = [await gpu2.create_submission(title=f"Upload {i}", staging="sync_failed") for i in range(3)]
        mine = await cluster.create_submission(title="Upload 4", staging="sync_failed")
        waiting = {sid: gpu2.sync_failed.setdefault(sid, asyncio.Event()) for sid in theirs}
        cluster.sync_failed[mine] = asyncio.Event()
        result = await act(stack, team, action="retry_sync", submissions=[*theirs, mine])
        assert {k: result[k] for k in ("message", "acted", "unconfirmed", "level")} == {
            "message": "Retrying sync of 1 submission(s); 3 on gpu-2 not confirmed yet",
            "acted": 1,
            "unconfirmed": ["gpu-2"],
            "level": "warning",
        }
        # What the browser follows on the team channel's rows: each of them, until it leaves sync_failed.
        assert result["becomes"] == "syncing"
        assert [(p["cluster"], p["submissions"]) for p in result["pending"]] == [("gpu-2", sorted(theirs))]
        assert all(event.is_set() for event in waiting.values())  # it did resume them: it only never said so
        assert await pool.fetchval("select staging from submissions where id = $1", mine) == "syncing"
        cluster.sync_failed.clear()
        gpu2.confirm = True
        for sid in theirs:
            gpu2.sync_failed[sid] = asyncio.Event()
        result = await act(stack, team, action="retry_sync", submissions=theirs)
        assert (result["message"], result["level"]) == ("Retrying sync of 3 submission(s)", "success")
        again = await act(stack, team, action="retry_sync", submissions=theirs)
        assert (again["message"], again["level"]) == ("No submissions whose sync failed", "info")
    finally:
        await gpu2.stop()


async def test_edits_name_a_silent_cluster(stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster) -> None:
    gpu2 = await silent_cluster(stack, pool, team)
    try:
        (task,) = await gpu2.submit(
            [{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "p", "frame": 0}]
        )
        sid = await submission_of(pool, task)
        result = await act(stack, team, action="priority", submissions=[sid], priority=5)
        assert (result["message"], result["level"]) == (
            "Setting priority to 5 on 1 submission(s) on gpu-2: not confirmed yet",
            "warning",
        )
        result = await act(stack, team, action="instance_type", submissions=[sid], instance_type="highmem")
        assert (result["message"], result["level"]) == (
            "Changing instance type to highmem on 1 submission(s) on gpu-2: not confirmed yet",
            "warning",
        )
    finally:
        await gpu2.stop()


async def test_reviewed_toggles(stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster) -> None:
    ids, _ = await tasks(cluster, team, 1)
    sid = await submission_of(pool, ids[0])
    assert await act(stack, team, action="reviewed", submissions=[sid]) == {
        "message": "Marked 1 submission(s) reviewed",
        "acted": 1,
        "unconfirmed": [],
        "level": "success",
    }
    again = await act(stack, team, action="reviewed", submissions=[sid])
    assert (again["message"], again["level"]) == ("Already marked reviewed", "info")
    undone = await act(stack, team, action="reviewed", submissions=[sid], reviewed=False)
    assert (undone["message"], undone["level"]) == ("Marked 1 submission(s) not reviewed", "success")
    assert await pool.fetchval("select reviewed from submissions where id = $1", sid) is False


async def test_instance_types_are_the_clusters_and_others_are_refused(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    sid = await cluster.create_submission(title="Render", instance_type="standard")
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        offered = await client.get(
            f"/api/submissions/instance-types?submission={sid}", headers={"Authorization": f"Bearer {team.token}"}
        )
    assert offered.status_code == 200
    body = offered.json()
    assert body["clusters"] == ["gpu-1"]
    assert {t["name"]: (t["cores"], t["memory_gb"], t["preemptible"]) for t in body["instance_types"]} == {
        "standard": (4, 16, False),
        "highmem": (8, 64, False),
        "highcpu": (32, 64, False),
        "gpu-large": (32, 128, False),
        "standard-spot": (4, 16, True),
        "highcpu-spot": (32, 64, True),
    }
    refused = await act_raw(stack, team, action="instance_type", submissions=[sid], instance_type="7")
    assert refused.status_code == 422
    assert refused.json()["message"] == (
        "instance_type: 7 is not an instance type of cluster gpu-1 (offers: standard, "
        "standard-spot, highmem, highcpu, highcpu-spot, gpu-large)"
    )
    wrong = await act_raw(stack, team, action="instance_type", submissions=[sid], instance_type="highmem", cores=2)
    assert (wrong.status_code, wrong.json()["message"]) == (422, "cores: instance type highmem has 8 cores")
    spot = await act(stack, team, action="instance_type", submissions=[sid], instance_type="highcpu-spot")
    assert spot["message"] == "Instance type set to highcpu-spot on 1 submission(s)"
    row = await pool.fetchrow("select instance_type, cores, memory_gb, preemptible from submissions where id = $1", sid)
    assert tuple(row) == ("highcpu-spot", 32, 64, True)  # a preemptible type makes it PREEMPTIBLE
    missing = await act_raw(stack, team, action="priority", submissions=[sid])
    assert (missing.status_code, missing.json()["message"]) == (
        422,
        "priority: a whole number from -1000 to 1000 is required",
    )


async def test_a_retried_downloaded_submission_is_downloaded_again_only_when_its_new_results_are(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    """Retry on a downloaded submission takes the mark off: once its tasks complete again it is a success, not
    downloaded already (gateway.core.lifecycle: downloaded -> pending by Retry)."""
    ids, _ = await tasks(cluster, team, 2)
    sid = await submission_of(pool, ids[0])
    for job_id in ids:
        cluster.jobs[job_id].status = "completed"
        cluster._report(cluster.jobs[job_id])
    await cluster.flushed()
    await cluster.update_submission(sid, downloaded=True)
    window = f"/api/teams/{team.id}/submissions?sort=id&dir=desc"

    async def status() -> str:
        async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
            answer = await client.get(window, headers={"Authorization": f"Bearer {team.token}"})
        # Not listed until the relay has saved its row: waited for as any other status.
        return next((r["status"] for r in answer.json()["rows"] if r["id"] == sid), "not listed yet")

    async def becomes(wanted: str) -> None:
        deadline = asyncio.get_running_loop().time() + 30  # a few relay cycles, on a busy machine
        while asyncio.get_running_loop().time() < deadline:
            if await status() == wanted:
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"submission {sid} stayed {await status()}, not {wanted}")

    await becomes("downloaded")
    result = await act(stack, team, action="retry", submissions=[sid])
    assert result["message"] == "Queued 2 task(s) for retry", result
    assert await pool.fetchval("select downloaded_at from submissions where id = $1", sid) is None
    await becomes("pending")
    for job_id in ids:
        cluster.jobs[job_id].status = "completed"
        cluster._report(cluster.jobs[job_id])
    await cluster.flushed()
    await becomes("success")


async def test_a_killed_submission_says_who_killed_it_and_when_live_and_in_its_window(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    """ "Killed by Ada Lovelace at 20:16": the row carries who last acted on its tasks, and when (sql/022)."""
    name = await pool.fetchval("select name from users where id = $1", team.user_id)
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(f"team:{team.id}")  # first: the submission's row then arrives as news, whatever the snapshot
        ids, _ = await tasks(cluster, team, 3)
        sid = await submission_of(pool, ids[0])
        await f.wait_for(lambda f: rows(f, team).get(sid, {}).get("tasks") == 3)
        assert "acted" not in rows(f, team)[sid]  # no one acted on it yet: nothing on the wire
        assert (await act(stack, team, action="kill", submissions=[sid]))["message"] == "Killed 3 task(s)"
        await f.wait_for(lambda f: rows(f, team)[sid].get("acted") == "kill", timeout=30)
        live = rows(f, team)[sid]
    assert (live["acted_by"], live["acted_by_name"]) == (team.user_id, name)
    acted_at = await pool.fetchval("select acted_at from submissions where id = $1", sid)
    assert datetime.fromisoformat(live["acted_at"]) == acted_at
    async with httpx.AsyncClient(base_url=stack.nodes[1].http) as client:  # a fresh page reads its window
        response = await client.get(
            f"/api/teams/{team.id}/submissions", headers={"Authorization": f"Bearer {team.token}"}
        )
    (row,) = [r for r in response.json()["rows"] if r["id"] == sid]
    assert {k: row.get(k) for k in ("acted", "acted_by", "acted_by_name", "acted_at")} == {
        k: live[k] for k in ("acted", "acted_by", "acted_by_name", "acted_at")
    }
    # A hold is the row's last action from then on, as its cluster confirms it.
    more, _ = await tasks(cluster, team, 2)
    other = await submission_of(pool, more[0])
    await act(stack, team, action="hold", submissions=[other])
    assert await pool.fetchval("select acted from submissions where id = $1", other) == "hold"


async def test_priority_instance_type_and_retry_failed_jobs_say_who_changed_the_submission(
    stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    """ "Priority set by Ada Lovelace at 20:16", "Instance type changed by ...", "Failed tasks retried by ...": the
    edits and Retry Failed Jobs of a trajectory mark the submissions they touch, like Kill and Hold."""
    name = await pool.fetchval("select name from users where id = $1", team.user_id)
    queued, _ = await tasks(cluster, team, 2)
    sid = await submission_of(pool, queued[0])

    async def acted(submission: int) -> tuple[Any, ...]:
        row = await pool.fetchrow(
            "select acted, acted_by, acted_by_name, acted_at is not null as at from submissions where id = $1",
            submission,
        )
        return tuple(row)

    # A page reads it in the submission's row, live (subscribed first: a row streamed before would be missed)
    async with Follower(stack.nodes[0].ws, team.token) as f:
        await f.subscribe(f"team:{team.id}")
        assert await acted(sid) == (None, None, None, False)
        assert (await act(stack, team, action="priority", submissions=[sid], priority=5))["level"] == "success"
        assert await acted(sid) == ("priority", team.user_id, name, True)
        edited = await act(stack, team, action="instance_type", submissions=[sid], instance_type="gpu-large")
        assert edited["level"] == "success", edited
        assert await acted(sid) == ("instance_type", team.user_id, name, True)
        # Retry Failed Jobs from a trajectory's panel marks the submissions of the jobs it retried, and only those.
        failed = await cluster.submit(
            [{"trajectory_id": team.trajectory_id, "kind": "analysis", "name": "a", "frame": 0}]
        )
        cluster.jobs[failed[0]].status = "failed"
        cluster._report(cluster.jobs[failed[0]], error="boom")
        await cluster.flushed()
        await cluster.flushed()
        retried = await submission_of(pool, failed[0])
        assert retried != sid
        async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
            response = await client.post(
                f"/api/trajectories/{team.trajectory_id}/retry-failed",
                headers={"Authorization": f"Bearer {team.token}"},
            )
        assert response.json()["message"] == "Queued 1 failed job(s) for retry", response.text
        assert await acted(retried) == ("retry_failed", team.user_id, name, True)
        assert (await acted(sid))[0] == "instance_type"
        await f.wait_for(
            lambda f: (
                (rows(f, team).get(sid, {}).get("acted"), rows(f, team).get(retried, {}).get("acted"))
                == ("instance_type", "retry_failed")
            ),
            timeout=30,
        )
    async with httpx.AsyncClient(base_url=stack.nodes[1].http) as client:
        response = await client.get(
            f"/api/teams/{team.id}/submissions", headers={"Authorization": f"Bearer {team.token}"}
        )
    shown = {r["id"]: (r.get("acted"), r.get("acted_by_name")) for r in response.json()["rows"]}
    assert shown[sid] == ("instance_type", name) and shown[retried] == ("retry_failed", name)
