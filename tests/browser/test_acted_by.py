"""A row says who acted on it, and when: a submission one member killed reads "Killed by Ada Lovelace at 20:16" on
the other member's Submissions page, and the trajectory panel says who removed its running jobs."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from gateway.credentials import issue_token
from gateway.sim.cluster import SimCluster
from tests.browser.helpers import sign_in
from tests.conftest import Stack
from tests.integration.conftest import Team

CLOCK = r"\d{2}:\d{2}"  # 24-hour, the page's clock


@pytest.fixture
async def cluster(stack: Stack, team: Team) -> AsyncIterator[SimCluster]:
    c = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await c.start()
    yield c
    await c.stop()


async def running(cluster: SimCluster, team: Team, n: int) -> list[int]:
    ids = await cluster.submit(
        [
            {"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "Preprocess", "frame": i}
            for i in range(n)
        ]
    )
    for job_id in ids:
        cluster.jobs[job_id].status = "running"
        cluster._report(cluster.jobs[job_id])
    await cluster.flushed()
    await cluster.flushed()
    return ids


async def test_a_submission_one_member_killed_says_so_on_the_other_members_row(
    page: Any, browser: Any, stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    ada = f"Ada Lovelace {secrets.token_hex(2)}"
    await pool.execute("update users set name = $2 where id = $1", team.user_id, ada)
    other = await pool.fetchval("insert into users (name) values ($1) returning id", f"Linus {secrets.token_hex(2)}")
    await pool.execute("insert into memberships (team_id, user_id) values ($1, $2)", team.id, other)
    ids = await running(cluster, team, 3)
    sid = await pool.fetchval("select submission_id from jobs where id = $1", ids[0])
    row = f"tr[data-sub='{sid}']"
    status = f'document.querySelector("{row}")?.children[2]'

    context = await browser.new_context(viewport={"width": 1200, "height": 800}, bypass_csp=True)
    try:
        theirs = await context.new_page()
        errors: list[str] = []
        theirs.on("pageerror", lambda e: errors.append(str(e)))
        await sign_in(theirs, stack.nodes[1].http, issue_token(stack.secret, other, 3600))
        await theirs.goto(f"{stack.nodes[1].http}/submissions")
        await theirs.wait_for_function(f"{status}?.textContent === 'running'")
        assert await theirs.get_attribute(row + " td:nth-child(3)", "title") is None  # no one acted on it yet

        await page.reload()  # Ada's page knows the new member too (it read the team when it opened)
        await page.goto(f"{stack.nodes[0].http}/submissions")
        await page.wait_for_function(f"{status}?.textContent === 'running'")
        await page.click(row, button="right")
        await page.click("role=menuitem[name='Kill']")
        await page.locator("dialog h2", has_text="Kill 3 tasks of 1 submission on gpu-1?").wait_for()
        await page.click("dialog button[type='submit']")
        await page.locator(".toast", has_text="Killed 3 task(s)").wait_for()

        # The other member's row says who killed it and when, live.
        await theirs.wait_for_function(f"/^Killed by {ada} at {CLOCK}$/.test({status}?.title || '')", timeout=30_000)
        shown = await theirs.evaluate(f"{status}.title")
        acted_at = await pool.fetchval("select acted_at from submissions where id = $1", sid)
        expected = await theirs.evaluate(
            "(at) => new Date(at).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit', hourCycle: 'h23'})",
            acted_at.isoformat(),
        )
        assert shown == f"Killed by {ada} at {expected}"
        await theirs.reload()  # a fresh page reads it in its window too
        await theirs.wait_for_function(f"{status}?.title === {shown!r}")
        assert errors == []
    finally:
        await context.close()


async def test_the_trajectory_panel_says_who_removed_its_running_jobs(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, cluster: SimCluster
) -> None:
    name = await pool.fetchval("select name from users where id = $1", team.user_id)
    trajectory = await pool.fetchval("select name from trajectories where id = $1", team.trajectory_id)
    await running(cluster, team, 3)
    await page.goto(f"{stack.nodes[0].http}/?panel={team.trajectory_id}")
    await page.locator("#panel-menu").wait_for()
    note = page.locator("#panel .removal-note")
    assert await note.is_hidden()
    await page.click("#panel-menu")
    await page.click("role=menuitem[name='Remove Running Jobs']")
    await page.locator("dialog h2", has_text=f"Remove 3 jobs of {trajectory} on gpu-1?").wait_for()
    await page.click("dialog button[type='submit']")
    await page.locator(".toast", has_text="Removed 3 job(s)").wait_for()
    await page.wait_for_function(
        f"/^Removed by {name} at {CLOCK} \\(3 jobs\\)$/.test(document.querySelector('#panel .removal-note')?.textContent"
        " || '')",
        timeout=30_000,
    )
    assert await note.is_visible()
