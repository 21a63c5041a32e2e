"""Every row a caller names is checked against the caller's team: another team's row is refused exactly like
one that does not exist (same status, same message but for the id), nothing is written, and the actions
only ever touch the acting team's jobs, even when bad rows exist."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

import asyncpg
import httpx
import pytest

from gateway.store import queries
from gateway.web.http.guards import MembersTeamOf, Refused, members_team
from gateway.web.people.auth import new_cluster_key
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs, make_team

MISSING = 2**62  # a valid id that names no row


@dataclass
class Teams:
    mine: Team
    other: Team
    analysis: int  # of my trajectory
    other_analysis: int  # of the other team's trajectory
    submission: int  # mine
    other_submission: int
    other_job: int


@pytest.fixture
async def teams(stack: Stack, pool: asyncpg.Pool) -> Teams:
    mine, other = await make_team(pool, stack.secret), await make_team(pool, stack.secret)
    await pool.execute("update clusters set name = 'theirs' where id = $1", other.cluster_id)
    analysis = await _analysis(pool, mine.trajectory_id)
    other_analysis = await _analysis(pool, other.trajectory_id)
    (my_job,) = await insert_jobs(pool, mine, 1)
    (other_job,) = await insert_jobs(pool, other, 1)
    submission = await pool.fetchval("select submission_id from jobs where id = $1", my_job)
    other_submission = await pool.fetchval("select submission_id from jobs where id = $1", other_job)
    return Teams(mine, other, analysis, other_analysis, submission, other_submission, other_job)


async def _analysis(pool: asyncpg.Pool, trajectory_id: int) -> int:
    return int(
        await pool.fetchval(
            "insert into analyses (trajectory_id, plugin) values ($1, 'Radial Distribution Function') returning id",
            trajectory_id,
        )
    )


async def send(stack: Stack, method: str, path: str, token: str, body: Any = None) -> httpx.Response:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, timeout=10) as client:
        return await client.request(method, path, json=body, headers={"Authorization": f"Bearer {token}"})


def new_job(trajectory_id: int, **extra: object) -> dict[str, object]:
    return {
        "status": "queued",
        "trajectory_id": trajectory_id,
        "kind": "analysis",
        "name": "Radial Distribution Function",
        **extra,
    }


# (what is named, the request naming `ref`, the field's status and message with {ref} for the id)
Request = Callable[[Teams, int], tuple[str, str, str, object]]  # -> method, path, token, body
REFERENCES: dict[str, tuple[Callable[[Teams], int], Request, int, str]] = {
    "a new job's trajectory": (
        lambda t: t.other.trajectory_id,
        lambda t, ref: (
            "POST",
            "/api/ingest/jobs",
            t.mine.cluster_key,
            {"jobs": [new_job(t.mine.trajectory_id), new_job(ref)]},
        ),
        422,
        "jobs[1].trajectory_id: no trajectory {ref} in this cluster's team",
    ),
    "a new job's analysis": (
        lambda t: t.other_analysis,
        lambda t, ref: (
            "POST",
            "/api/ingest/jobs",
            t.mine.cluster_key,
            {"jobs": [new_job(t.mine.trajectory_id), new_job(t.mine.trajectory_id, analysis_id=ref)]},
        ),
        422,
        "jobs[1].analysis_id: no analysis {ref} in this cluster's team",
    ),
    "a new job's submission": (
        lambda t: t.other_submission,
        lambda t, ref: (
            "POST",
            "/api/ingest/jobs",
            t.mine.cluster_key,
            {"jobs": [new_job(t.mine.trajectory_id), new_job(t.mine.trajectory_id, submission_id=ref)]},
        ),
        422,
        "jobs[1].submission_id: no submission {ref} of this cluster",
    ),
    "a reported job": (
        lambda t: t.other_job,
        lambda t, ref: (
            "POST",
            "/api/ingest/jobs",
            t.mine.cluster_key,
            {"jobs": [new_job(t.mine.trajectory_id), {"id": ref, "status": "failed"}]},
        ),
        422,
        "jobs[1].id: no job {ref} on this cluster",
    ),
    "a new analysis's trajectory": (
        lambda t: t.other.trajectory_id,
        lambda t, ref: ("POST", "/api/ingest/analyses", t.mine.cluster_key, {"trajectory_id": ref, "plugin": "RMSD"}),
        422,
        "trajectory_id: no trajectory {ref} in this cluster's team",
    ),
    "a new submission's trajectory": (
        lambda t: t.other.trajectory_id,
        lambda t, ref: (
            "POST",
            "/api/ingest/submissions",
            t.mine.cluster_key,
            {"title": "batch", "trajectory_id": ref},
        ),
        422,
        "trajectory_id: no trajectory {ref} in this cluster's team",
    ),
    "a new submission's user": (
        lambda t: t.other.user_id,
        lambda t, ref: ("POST", "/api/ingest/submissions", t.mine.cluster_key, {"title": "batch", "user_id": ref}),
        422,
        "user_id: no member {ref} of this cluster's team",
    ),
    "a submission a cluster updates": (
        lambda t: t.other_submission,
        lambda t, ref: ("POST", f"/api/ingest/submissions/{ref}", t.mine.cluster_key, {"staging": "syncing"}),
        404,
        "id: no submission {ref} of this cluster",
    ),
    "a trajectory acted on": (
        lambda t: t.other.trajectory_id,
        lambda t, ref: ("POST", f"/api/trajectories/{ref}/remove-running", t.mine.token, None),
        403,
        "only members of the team may act on its jobs",
    ),
    "an analysis acted on": (
        lambda t: t.other_analysis,
        lambda t, ref: ("POST", f"/api/analyses/{ref}/retry-failed", t.mine.token, None),
        403,
        "only members of the team may act on its jobs",
    ),
    "a selected submission": (
        lambda t: t.other_submission,
        lambda t, ref: (
            "POST",
            "/api/submissions/actions",
            t.mine.token,
            {"action": "kill", "submissions": [t.submission, ref]},
        ),
        403,
        "submissions[1]: no submission {ref} in your teams",
    ),
    "a selected task": (
        lambda t: t.other_job,
        lambda t, ref: (
            "POST",
            "/api/submissions/actions",
            t.mine.token,
            {"action": "kill", "submissions": [t.submission], "tasks": [ref]},
        ),
        403,
        "tasks[0]: no task {ref} in your teams",
    ),
    "a team's members": (
        lambda t: t.other.id,
        lambda t, ref: ("GET", f"/api/teams/{ref}/members", t.mine.token, None),
        403,
        "not a member of this team",
    ),
    "a team's trajectories": (
        lambda t: t.other.id,
        lambda t, ref: ("GET", f"/api/teams/{ref}/trajectories", t.mine.token, None),
        403,
        "not a member of this team",
    ),
    "a team's active trajectories": (
        lambda t: t.other.id,
        lambda t, ref: ("GET", f"/api/teams/{ref}/trajectories/active?q=a", t.mine.token, None),
        403,
        "not a member of this team",
    ),
    "a team's submissions": (
        lambda t: t.other.id,
        lambda t, ref: ("GET", f"/api/teams/{ref}/submissions?sort=title", t.mine.token, None),
        403,
        "not a member of this team",
    ),
    "a team's submissions as CSV": (
        lambda t: t.other.id,
        lambda t, ref: ("GET", f"/api/teams/{ref}/submissions.csv", t.mine.token, None),
        403,
        "not a member of this team",
    ),
    "a team's projects": (
        lambda t: t.other.id,
        lambda t, ref: ("GET", f"/api/teams/{ref}/projects", t.mine.token, None),
        403,
        "not a member of this team",
    ),
    "a preview of an action on a submission": (
        lambda t: t.other_submission,
        lambda t, ref: (
            "POST",
            "/api/submissions/actions/preview",
            t.mine.token,
            {"action": "kill", "submissions": [ref]},
        ),
        403,
        "submissions[0]: no submission {ref} in your teams",
    ),
    "a preview of Remove Running Jobs": (
        lambda t: t.other.trajectory_id,
        lambda t, ref: ("GET", f"/api/trajectories/{ref}/remove-running/preview", t.mine.token, None),
        403,
        "only members of the team may act on its jobs",
    ),
    "a trajectory's analyses": (
        lambda t: t.other.trajectory_id,
        lambda t, ref: ("GET", f"/api/trajectories/{ref}/analyses", t.mine.token, None),
        403,
        "not a member of this team",
    ),
    "an analysis deleted": (
        lambda t: t.other_analysis,
        lambda t, ref: ("DELETE", f"/api/analyses/{ref}", t.mine.token, None),
        403,
        "only members of the team may delete its analyses",
    ),
}


async def _writes(pool: asyncpg.Pool, teams: Teams) -> tuple[Any, ...]:
    """Everything the refused requests could have written, in both teams."""
    team_ids = [teams.mine.id, teams.other.id]
    return (
        await pool.fetchval("select count(*) from jobs where team_id = any($1::bigint[])", team_ids),
        await pool.fetchval(
            "select count(*) from analyses a join trajectories t on t.id = a.trajectory_id"
            " where t.team_id = any($1::bigint[])",
            team_ids,
        ),
        tuple(
            await pool.fetch(
                "select id, staging, held, version from submissions where team_id = any($1::bigint[]) order by id",
                team_ids,
            )
        ),
        tuple(
            await pool.fetch(
                "select id, status, attempts, version from jobs where team_id = any($1::bigint[]) order by id", team_ids
            )
        ),
    )


@pytest.mark.parametrize("reference", REFERENCES)
async def test_another_teams_row_is_refused_like_one_that_does_not_exist(
    stack: Stack, pool: asyncpg.Pool, teams: Teams, reference: str
) -> None:
    foreign_of, request, status, message = REFERENCES[reference]
    before = await _writes(pool, teams)
    for ref in (foreign_of(teams), MISSING):
        method, path, token, body = request(teams, ref)
        response = await send(stack, method, path, token, body)
        assert (response.status_code, response.json()["message"]) == (status, message.format(ref=ref)), (
            ref,
            response.text,
        )
    assert await _writes(pool, teams) == before  # all or nothing: the valid rows before the bad one are not written


# -- another team's id and a missing one: the same answer, from the same statements (timing told them
# apart when a missing id skipped the membership query)

BY_ID = [
    "a trajectory acted on",
    "an analysis acted on",
    "a preview of Remove Running Jobs",
    "a trajectory's analyses",
    "an analysis deleted",
]


@pytest.mark.parametrize("reference", BY_ID)
async def test_another_teams_id_and_a_missing_one_answer_byte_for_byte_the_same(
    stack: Stack, teams: Teams, reference: str
) -> None:
    foreign_of, request, status, _ = REFERENCES[reference]
    answers = []
    for ref in (foreign_of(teams), MISSING):
        response = await send(stack, *request(teams, ref))
        answers.append((response.status_code, response.headers["content-type"], response.content))
    assert answers[0] == answers[1]
    assert answers[0][0] == status


@pytest.mark.parametrize(
    "team_of, own, foreign",
    [
        (queries.members_team_of_trajectory, lambda t: t.mine.trajectory_id, lambda t: t.other.trajectory_id),
        (queries.members_team_of_analysis, lambda t: t.analysis, lambda t: t.other_analysis),
    ],
    ids=["trajectory", "analysis"],
)
async def test_the_membership_guard_runs_one_statement_whether_the_id_exists_or_not(
    database_url: str,
    teams: Teams,
    team_of: MembersTeamOf,
    own: Callable[[Teams], int],
    foreign: Callable[[Teams], int],
) -> None:
    statements: list[str] = []

    def log(record: asyncpg.connection.LoggedQuery) -> None:
        if not record.query.startswith("SELECT pg_advisory_unlock_all()"):  # the pool's own reset on release
            statements.append(record.query)

    async def logged(conn: asyncpg.Connection) -> None:
        conn.add_query_logger(log)

    async with asyncpg.create_pool(database_url, min_size=1, max_size=1, init=logged) as pool:
        request = cast(
            Any, SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(runtime=SimpleNamespace(pool=pool))))
        )
        seen = {}
        for name, ref in (("own", own(teams)), ("foreign", foreign(teams)), ("missing", MISSING)):
            statements.clear()
            try:
                seen[name] = (await members_team(request, teams.mine.user_id, team_of, ref, "no"), list(statements))
            except Refused as refused:
                seen[name] = ((refused.status, refused.code, refused.message), list(statements))
    assert seen["foreign"] == seen["missing"] == ((403, "forbidden", "no"), seen["own"][1])
    assert seen["own"][0] == teams.mine.id and len(seen["own"][1]) == 1


# -- a cluster's key acts only on what that cluster staged (one cluster of a team could move another's)


async def test_a_cluster_acts_only_on_its_own_submissions(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    second_id = await pool.fetchval("insert into clusters (team_id, name) values ($1, 'gpu-2') returning id", team.id)
    second_key, key_hash = new_cluster_key(second_id)
    await pool.execute("update clusters set key_hash = $2 where id = $1", second_id, key_hash)
    created = await send(
        stack, "POST", "/api/ingest/submissions", team.cluster_key, {"title": "batch", "staging": "syncing"}
    )
    assert created.status_code == 200, created.text
    sid = created.json()["id"]
    state = "select staging, downloaded_at, cluster_id, version from submissions where id = $1"
    before = await pool.fetchrow(state, sid)
    assert before["cluster_id"] == team.cluster_id
    for body in ({"staging": "sync_failed"}, {"downloaded": True}):
        answers = []
        for ref in (sid, MISSING):
            response = await send(stack, "POST", f"/api/ingest/submissions/{ref}", second_key, body)
            answers.append((response.status_code, response.content.replace(str(ref).encode(), b"ID")))
        assert (
            answers[0] == answers[1] == (404, b'{"error":"not_found","message":"id: no submission ID of this cluster"}')
        )
    assert await pool.fetchrow(state, sid) == before  # nothing written
    # Nor does it add a job to it: refused as a submission that does not exist is.
    answers = []
    for ref in (sid, MISSING):
        response = await send(
            stack, "POST", "/api/ingest/jobs", second_key, {"jobs": [new_job(team.trajectory_id, submission_id=ref)]}
        )
        answers.append((response.status_code, response.content.replace(str(ref).encode(), b"ID")))
    assert answers[0] == answers[1] and answers[0][0] == 422, answers
    assert b"jobs[0].submission_id: no submission ID of this cluster" in answers[0][1]
    assert await pool.fetchval("select count(*) from jobs where submission_id = $1", sid) == 0
    own = await send(stack, "POST", f"/api/ingest/submissions/{sid}", team.cluster_key, {"staging": "sync_failed"})
    assert own.status_code == 204, own.text
    assert await pool.fetchval("select staging from submissions where id = $1", sid) == "sync_failed"


async def test_a_submission_without_a_cluster_is_any_of_its_teams_clusters(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """Written before submissions named their cluster: `sync` goes to every cluster of the team, so any of them
    reports on it (and another team's clusters still cannot)."""
    sid = await pool.fetchval(
        "insert into submissions (team_id, trajectory_id, title, staging) values ($1, $2, 'old', 'syncing')"
        " returning id",
        team.id,
        team.trajectory_id,
    )
    second_id = await pool.fetchval("insert into clusters (team_id, name) values ($1, 'gpu-2') returning id", team.id)
    second_key, key_hash = new_cluster_key(second_id)
    await pool.execute("update clusters set key_hash = $2 where id = $1", second_id, key_hash)
    other = await make_team(pool, stack.secret)
    refused = await send(stack, "POST", f"/api/ingest/submissions/{sid}", other.cluster_key, {"staging": "ready"})
    assert refused.status_code == 404
    response = await send(stack, "POST", f"/api/ingest/submissions/{sid}", second_key, {"staging": "ready"})
    assert response.status_code == 204, response.text
    assert await pool.fetchval("select staging from submissions where id = $1", sid) == "ready"


async def test_a_new_jobs_analysis_must_be_of_its_trajectory(stack: Stack, pool: asyncpg.Pool, teams: Teams) -> None:
    second = await pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, 'second') returning id", teams.mine.id
    )
    before = await _writes(pool, teams)
    response = await send(
        stack,
        "POST",
        "/api/ingest/jobs",
        teams.mine.cluster_key,
        {"jobs": [new_job(second, analysis_id=teams.analysis)]},
    )
    assert response.status_code == 422
    assert response.json()["message"] == f"jobs[0].analysis_id: analysis {teams.analysis} is not of trajectory {second}"
    assert await _writes(pool, teams) == before
    ok = await send(
        stack,
        "POST",
        "/api/ingest/jobs",
        teams.mine.cluster_key,
        {"jobs": [new_job(teams.mine.trajectory_id, analysis_id=teams.analysis)]},
    )
    assert ok.status_code == 200 and ok.json()["created"] == 1


# -- the database holds every writer to the same (sql/007_team_references.sql)

PLAIN_WRITES: dict[str, Callable[[Teams], tuple[str, list[object]]]] = {
    "a job on another team's trajectory": lambda t: (
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name) values ($1, $2, $3, 'preprocess', 'x')",
        [t.mine.id, t.other.trajectory_id, t.mine.cluster_id],
    ),
    "a job on another team's cluster": lambda t: (
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name) values ($1, $2, $3, 'preprocess', 'x')",
        [t.mine.id, t.mine.trajectory_id, t.other.cluster_id],
    ),
    "a job of another trajectory's analysis": lambda t: (
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, analysis_id) values ($1, $2, $3, 'analysis', 'x', $4)",
        [t.mine.id, t.mine.trajectory_id, t.mine.cluster_id, t.other_analysis],
    ),
    "a job in another team's submission": lambda t: (
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, submission_id) values ($1, $2, $3, 'analysis', 'x', $4)",
        [t.mine.id, t.mine.trajectory_id, t.mine.cluster_id, t.other_submission],
    ),
    "a submission of another team's trajectory": lambda t: (
        "insert into submissions (team_id, trajectory_id, title) values ($1, $2, 'x')",
        [t.mine.id, t.other.trajectory_id],
    ),
}


@pytest.mark.parametrize("write", PLAIN_WRITES)
async def test_plain_sql_cannot_cross_teams_either(pool: asyncpg.Pool, teams: Teams, write: str) -> None:
    sql, args = PLAIN_WRITES[write](teams)
    with pytest.raises(asyncpg.ForeignKeyViolationError):
        await pool.execute(sql, *args)


# -- actions select by team, whatever rows name the scope


@contextlib.asynccontextmanager
async def bad_job(pool: asyncpg.Pool, **columns: object) -> AsyncIterator[int]:
    """A row the constraints refuse today (written before them, or by hand): triggers and keys are off for it,
    so no one else sees it come or go."""
    names = ", ".join(columns)
    values = ", ".join(f"${i}" for i in range(1, len(columns) + 1))
    async with pool.acquire() as conn:
        try:
            await conn.execute("set session_replication_role = replica")
        except asyncpg.InsufficientPrivilegeError:
            pytest.skip("writing a row past the foreign keys takes a superuser")
        try:
            job_id = await conn.fetchval(
                f"insert into jobs ({names}) values ({values}) returning id", *columns.values()
            )
            yield int(job_id)
        finally:
            await conn.execute("delete from jobs where id = $1", job_id)
            await conn.execute("reset session_replication_role")


Act = Callable[[Stack, Teams], Awaitable[httpx.Response]]
ACTIONS: dict[str, tuple[Callable[[Teams], dict[str, object]], Act, str]] = {
    # What names my analysis, my trajectory or my submission but is another team's job (or on its cluster).
    "retry an analysis": (
        lambda t: {
            "team_id": t.other.id,
            "trajectory_id": t.other.trajectory_id,
            "cluster_id": t.other.cluster_id,
            "analysis_id": t.analysis,
            "kind": "analysis",
            "name": "x",
            "status": "failed",
        },
        lambda s, t: send(s, "POST", f"/api/analyses/{t.analysis}/retry-failed", t.mine.token),
        "No failed jobs found to retry",
    ),
    "remove a trajectory's running jobs": (
        lambda t: {
            "team_id": t.other.id,
            "trajectory_id": t.mine.trajectory_id,
            "cluster_id": t.other.cluster_id,
            "kind": "preprocess",
            "name": "x",
            "status": "running",
        },
        lambda s, t: send(s, "POST", f"/api/trajectories/{t.mine.trajectory_id}/remove-running", t.mine.token),
        "Removing 1 job(s) on gpu-1: not confirmed yet",
    ),
    "retry a trajectory's jobs on another team's cluster": (
        lambda t: {
            "team_id": t.mine.id,
            "trajectory_id": t.mine.trajectory_id,
            "cluster_id": t.other.cluster_id,
            "kind": "preprocess",
            "name": "x",
            "status": "failed",
        },
        lambda s, t: send(s, "POST", f"/api/trajectories/{t.mine.trajectory_id}/retry-failed", t.mine.token),
        "No failed jobs found to retry",
    ),
    "kill a submission's tasks": (
        lambda t: {
            "team_id": t.other.id,
            "trajectory_id": t.other.trajectory_id,
            "cluster_id": t.other.cluster_id,
            "submission_id": t.submission,
            "kind": "preprocess",
            "name": "x",
            "status": "running",
        },
        lambda s, t: send(
            s, "POST", "/api/submissions/actions", t.mine.token, {"action": "kill", "submissions": [t.submission]}
        ),
        "Killing 1 task(s) on gpu-1: not confirmed yet",  # my own queued task's cluster only (nobody listens)
    ),
    "reprioritise a submission": (
        lambda t: {
            "team_id": t.other.id,
            "trajectory_id": t.other.trajectory_id,
            "cluster_id": t.other.cluster_id,
            "submission_id": t.submission,
            "kind": "preprocess",
            "name": "x",
            "status": "queued",
        },
        lambda s, t: send(
            s,
            "POST",
            "/api/submissions/actions",
            t.mine.token,
            {"action": "priority", "submissions": [t.submission], "priority": 5},
        ),
        "Setting priority to 5 on 1 submission(s) on gpu-1: not confirmed yet",
    ),
}


@pytest.mark.parametrize("action", ACTIONS)
async def test_actions_touch_only_the_acting_teams_jobs_even_among_bad_rows(
    stack: Stack, pool: asyncpg.Pool, teams: Teams, action: str
) -> None:
    columns, act, message = ACTIONS[action]
    async with bad_job(pool, **columns(teams)) as bad:
        before = await pool.fetchrow("select status, attempts, removed_at, version from jobs where id = $1", bad)
        response = await act(stack, teams)
        assert response.status_code == 200, response.text
        assert response.json()["message"] == message  # their cluster ("theirs") was never asked
        assert (
            await pool.fetchrow("select status, attempts, removed_at, version from jobs where id = $1", bad) == before
        )
