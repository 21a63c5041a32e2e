"""The Submissions page at a farm's scale, over HTTP as the page and tools read it: more rows than any page, every
one reachable, sorted and filtered on the server over all rows, counted, exported whole, and kept live."""

from __future__ import annotations

import asyncio
import csv
import io
import time
from typing import Any

import asyncpg
import httpx
import pytest

from harness.follower import Follower
from tests.conftest import Stack
from tests.integration.conftest import Team, make_team

N = 620  # more than the old 500-row snapshot, and than any page


async def add_submissions(pool: asyncpg.Pool, team: Team, n: int) -> list[int]:
    """Plain SQL, as the platform writes: projects p0..p3, priorities spread, titles numbered."""
    rows = await pool.fetch(
        "insert into submissions (team_id, user_id, project, title, priority)"
        " select $1, $2, 'p' || (i % 4), 'Render shot ' || lpad(i::text, 4, '0'), (i * 7) % 50"
        " from generate_series(1, $3) i returning id",
        team.id,
        team.user_id,
        n,
    )
    return [r["id"] for r in rows]


async def window(stack: Stack, team: Team, **params: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        response = await client.get(
            f"/api/teams/{team.id}/submissions", params=params, headers={"Authorization": f"Bearer {team.token}"}
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def saved(stack: Stack, team: Team, n: int) -> None:
    """Wait until the relay saved all `n` rows (a window's total says so)."""
    deadline = time.monotonic() + 60
    while (await window(stack, team, limit=1))["total"] < n:
        assert time.monotonic() < deadline, f"the relay did not save {n} rows within 60 s"
        await asyncio.sleep(0.05)


@pytest.fixture
async def many(pool: asyncpg.Pool, stack: Stack, team: Team) -> list[int]:
    ids = await add_submissions(pool, team, N)
    await saved(stack, team, N)
    return ids


async def test_every_row_is_reachable_page_by_page_and_counted(stack: Stack, team: Team, many: list[int]) -> None:
    seen: list[int] = []
    offset = 0
    while True:
        page = await window(stack, team, sort="id", dir="asc", offset=offset, limit=100)
        assert page["total"] == N
        seen += [r["id"] for r in page["rows"]]
        offset += 100
        if offset >= page["total"]:
            break
    assert seen == sorted(many)  # every row once, in order: the first page begins at the smallest id
    first = await window(stack, team, sort="id", dir="desc", limit=3)
    assert [r["id"] for r in first["rows"]] == sorted(many, reverse=True)[:3]


async def test_sorting_is_over_all_rows_not_the_loaded_ones(stack: Stack, team: Team, many: list[int]) -> None:
    top = await window(stack, team, sort="priority", dir="desc", limit=500)
    priorities = [r["priority"] for r in top["rows"]]
    assert priorities[0] == 49 and priorities == sorted(priorities, reverse=True)
    titles = [r["title"] for r in (await window(stack, team, sort="title", dir="asc", limit=2))["rows"]]
    assert titles == ["Render shot 0001", "Render shot 0002"]
    last = await window(stack, team, sort="title", dir="asc", offset=N - 1, limit=100)
    assert [r["title"] for r in last["rows"]] == [f"Render shot {N:04d}"]


async def test_filters_search_and_counts(stack: Stack, pool: asyncpg.Pool, team: Team, many: list[int]) -> None:
    p1 = await window(stack, team, project="p1", limit=500)
    assert p1["total"] == N // 4 and {r["project"] for r in p1["rows"]} == {"p1"}
    both = await window(stack, team, project=["p1", "p2"], limit=1)
    assert both["total"] == N // 2
    found = await window(stack, team, q="shot 012")  # 0120..0129
    assert found["total"] == 10
    by_id = await window(stack, team, q=str(many[5]))
    assert many[5] in [r["id"] for r in by_id["rows"]]
    literal = await window(stack, team, q="%")  # a search for a percent sign, not for everything
    assert literal["total"] == 0
    pending = await window(stack, team, status="pending", limit=1)
    assert pending["total"] == N  # no tasks yet: every one waits
    assert (await window(stack, team, status="running"))["total"] == 0


async def test_a_search_finds_the_words_a_person_types(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    """Every word typed is a word of the title, the project or the user's name (any of them, any case), the last one
    at least begun; a part inside a word is not a word, and a search without a letter or digit finds no text."""
    await pool.execute("update users set name = 'Ada Okafor' where id = $1", team.user_id)
    titles = {
        "Copper grain, shot 0417": "Harbour",
        "sq020_sh0450_lighting_v012": "Harbour",
        "Forest fog (final)": "Tundra",
        "Café exterior, night": "Tundra",
    }
    ids: dict[str, int] = {}
    for title, project in titles.items():
        ids[title] = await pool.fetchval(
            "insert into submissions (team_id, user_id, project, title) values ($1, $2, $3, $4) returning id",
            team.id,
            team.user_id,
            project,
            title,
        )
    await saved(stack, team, len(titles))

    async def found(q: str) -> set[str]:
        body = await window(stack, team, q=q)
        assert body["total"] == len(body["rows"])
        return {r["title"] for r in body["rows"]}

    assert await found("copper gra") == {"Copper grain, shot 0417"}  # the last word as far as it is typed
    assert await found("cop grain") == set()  # a word before the last is a whole word
    assert await found("COPPER") == {"Copper grain, shot 0417"}  # case aside
    assert await found("0417") == await found("shot 04") == {"Copper grain, shot 0417"}
    assert await found("sh0450") == await found("lighting v01") == {"sq020_sh0450_lighting_v012"}
    assert await found("harb") == {"Copper grain, shot 0417", "sq020_sh0450_lighting_v012"}  # the project
    assert await found("okafor fog") == {"Forest fog (final)"}  # the user's name and the title together
    assert await found("ada") == set(titles)
    assert await found("café") == await found("CAFÉ NIGHT") == {"Café exterior, night"}
    assert await found("fog final") == await found("fog, (final") == {"Forest fog (final)"}  # punctuation aside
    assert await found("hot") == set()  # inside "shot": not the beginning of a word
    assert await found("copper tundra") == set()  # every word must be found
    assert await found("(") == set()
    assert await found(str(ids["Forest fog (final)"])) == {"Forest fog (final)"}  # a job id


async def test_a_row_changes_in_its_window_as_its_tasks_run(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    sid = (await add_submissions(pool, team, 1))[0]
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status)"
        " select $1, $2, $3, 'analysis', 'Analysis frame', f, $4, 'running' from generate_series(0, 3) f",
        team.id,
        team.trajectory_id,
        team.cluster_id,
        sid,
    )
    async with Follower(stack.nodes[1].ws, team.token) as f:
        await f.subscribe(f"team:{team.id}")
        await pool.execute("update jobs set status = 'completed' where submission_id = $1", sid)
        # The delta on the team channel, and then the window: never older than the delta already delivered.
        await f.wait_for(
            lambda f: any(
                r["id"] == sid and r["status"] == "success" for m in f.messages for r in m.get("submissions") or ()
            )
        )
        row = (await window(stack, team, q=str(sid)))["rows"][0]
    assert (row["status"], row["tasks"], row["counts"]["completed"]) == ("success", 4, 4)
    assert (await window(stack, team, status="success"))["total"] == 1
    assert (await window(stack, team, sort="progress", dir="desc", limit=1))["rows"][0]["id"] == sid


async def test_the_export_is_every_row_of_the_view(
    stack: Stack, pool: asyncpg.Pool, team: Team, many: list[int]
) -> None:
    formula = '=HYPERLINK("http://evil.example")'
    await pool.execute("update submissions set title = $2 where id = $1", many[0], formula)
    deadline = time.monotonic() + 30
    while (await window(stack, team, sort="id", dir="asc", limit=1))["rows"][0]["title"] != formula:
        assert time.monotonic() < deadline, "the relay did not save the new title"
        await asyncio.sleep(0.05)
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        async with client.stream(
            "GET",
            f"/api/teams/{team.id}/submissions.csv",
            params={"project": "p1", "sort": "id", "dir": "asc"},
            headers={"Authorization": f"Bearer {team.token}"},
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/csv")
            assert "attachment" in response.headers["content-disposition"]
            text = (await response.aread()).decode()
    lines = list(csv.reader(io.StringIO(text)))
    assert lines[0][:3] == ["JOB ID", "USER", "STATUS"]
    ids = [int(line[0]) for line in lines[1:]]
    expected = await pool.fetch("select id from submissions where team_id = $1 and project = 'p1' order by id", team.id)
    assert ids == [r["id"] for r in expected] and len(ids) == N // 4  # all of them, not a page
    assert lines[1][1].startswith("user ") and lines[1][2] == "pending"
    # The first submission (project p1: i = 1) has the formula: a spreadsheet reads it as text.
    assert lines[1][4] == "'" + formula


# The titles: each a formula for a spreadsheet that reads the export with `;` or tab as its separator.
FORMULA_TITLES = [
    "x;=cmd|' /C calc'!A0;",
    "x;=1+1",
    "x;+1+1",
    "x;-1+1",
    "x;@SUM(1+1)",
    "x\t=1+1",
    "a title\n=1+1",
]


async def test_no_reading_of_the_export_finds_a_formula(stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    """Read with `,`, `;` and tab as spreadsheets of different locales do: no cell starts a formula; read with `,`
    every row is there once, each title whole (its newline inside its cell)."""
    await pool.executemany(
        "insert into submissions (team_id, user_id, project, title) values ($1, $2, 'p', $3)",
        [(team.id, team.user_id, title) for title in FORMULA_TITLES],
    )
    await saved(stack, team, len(FORMULA_TITLES))
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, timeout=30) as client:
        response = await client.get(
            f"/api/teams/{team.id}/submissions.csv",
            params={"sort": "id", "dir": "asc"},
            headers={"Authorization": f"Bearer {team.token}"},
        )
    assert response.status_code == 200
    for separator in (",", ";", "\t"):
        lines = list(csv.reader(io.StringIO(response.text, newline=""), delimiter=separator))
        for line in lines:
            assert not any(cell[:1] in ("=", "+", "-", "@", "\t", "\r") and cell for cell in line), (separator, line)
    lines = list(csv.reader(io.StringIO(response.text, newline="")))
    assert len(lines) == 1 + len(FORMULA_TITLES)
    titles = [line[4] for line in lines[1:]]
    assert titles[0] == "x;'=cmd|' /C calc'!A0;" and titles[6] == "a title\n'=1+1"


async def exported_ids(stack: Stack, team: Team, **params: str) -> list[int]:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, timeout=30) as client:
        response = await client.get(
            f"/api/teams/{team.id}/submissions.csv", params=params, headers={"Authorization": f"Bearer {team.token}"}
        )
    assert response.status_code == 200, response.text
    return [int(line[0]) for line in list(csv.reader(io.StringIO(response.text)))[1:]]


async def test_the_export_reads_page_after_page_in_the_views_order(
    stack: Stack, pool: asyncpg.Pool, team: Team, many: list[int]
) -> None:
    """More rows than an export's page (500), sorted by a column with ties and by one with NULLs (ascending they
    come last, descending first, as in the page): every row once, in the window's order."""
    # Average frame times on a tenth of the rows, many sharing each value; the others have none (NULL): more than a
    # page of them.
    await pool.execute("update submission_rows set avg_frame = id % 7 where team_id = $1 and id % 10 = 0", team.id)
    for sort, direction in (("avg_frame", "asc"), ("avg_frame", "desc"), ("priority", "asc"), ("priority", "desc")):
        expected = await pool.fetch(
            f"select id from submission_rows where team_id = $1 order by {sort} {direction}, id {direction}", team.id
        )
        ids = await exported_ids(stack, team, sort=sort, dir=direction)
        assert ids == [r["id"] for r in expected], (sort, direction)
        page = await window(stack, team, sort=sort, dir=direction, offset=495, limit=10)
        assert [r["id"] for r in page["rows"]] == ids[495:505]  # the page's order is the export's


async def test_bad_windows_are_refused_by_name_and_other_teams_are_forbidden(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        auth = {"Authorization": f"Bearer {team.token}"}
        for params, name in (
            ({"sort": "password"}, "sort"),
            ({"sort": "id; drop table jobs"}, "sort"),
            ({"dir": "sideways"}, "dir"),
            ({"limit": "100000"}, "limit"),
            ({"offset": "-1"}, "offset"),
            ({"status": "exploded"}, "status"),
            ({"q": "x" * 201}, "q"),
            ({"user": "me"}, "user"),
        ):
            response = await client.get(f"/api/teams/{team.id}/submissions", params=params, headers=auth)
            assert response.status_code == 422, (params, response.text)
            assert response.json()["message"].startswith(f"{name}:")
        other = await make_team(pool, stack.secret)
        for path in ("submissions", "submissions.csv", "projects"):
            response = await client.get(f"/api/teams/{other.id}/{path}", headers=auth)
            assert response.status_code == 403, path
        assert (await client.get(f"/api/teams/{team.id}/submissions")).status_code == 401


async def test_projects_list_the_teams_projects(stack: Stack, team: Team, many: list[int]) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        response = await client.get(f"/api/teams/{team.id}/projects", headers={"Authorization": f"Bearer {team.token}"})
    assert response.json() == {"projects": ["p0", "p1", "p2", "p3"]}
