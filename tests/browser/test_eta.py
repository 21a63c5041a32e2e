"""The estimated time left, in real Chromium: the popover's rows, the dashboard's cards, the panel's analyses and the
Submissions page say about how long the work left takes, and say so when nobody can tell yet."""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.conftest import Stack
from tests.integration.conftest import Team


async def test_work_left_says_about_how_long_it_takes(page: Any, stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    analysis = await pool.fetchval(
        "insert into analyses (trajectory_id, plugin) values ($1, 'Radial Distribution Function') returning id",
        team.trajectory_id,
    )
    other = await pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, 'Copper grain') returning id", team.id
    )
    jobs = """
        insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, analysis_id, status, started_at,
                          finished_at)
        select $1, $2, $3, $4, $4, f, $5, $6, now() - interval '60 seconds', now() - interval '30 seconds'
        from generate_series(0, $7 - 1) f
    """
    # What the cluster did already: frames and analysis jobs that took 30 s each...
    await pool.execute(jobs, team.id, team.trajectory_id, team.cluster_id, "preprocess", None, "completed", 5)
    await pool.execute(jobs, team.id, team.trajectory_id, team.cluster_id, "analysis", analysis, "completed", 5)
    # ... and what waits, in this order: 40 frames (20 min of work), then 20 analysis jobs (10 min more).
    await pool.execute(jobs, team.id, team.trajectory_id, team.cluster_id, "preprocess", None, "queued", 40)
    await pool.execute(jobs, team.id, team.trajectory_id, team.cluster_id, "analysis", analysis, "queued", 20)
    # A kind the cluster never finished: nobody can tell.
    await pool.execute(jobs, team.id, other, team.cluster_id, "rasterize", None, "queued", 1)

    # The dashboard's cards.
    card = page.locator(f"[data-card='{team.trajectory_id}'] .meta .eta")
    await card.filter(has_text="about 30 min left").wait_for(timeout=20_000)
    unknown = page.locator(f"[data-card='{other}'] .meta .eta", has_text="time left unknown")
    await unknown.wait_for()
    # It says why, on hover: nothing of its kind has finished on the cluster yet (not a fault of the page).
    why = "unknown: nothing to time it from yet: fewer than 5 {} of one of its kinds"
    assert (await unknown.get_attribute("title") or "").startswith(why.format("jobs"))
    assert await card.get_attribute("title") is None  # a figure needs no reason
    # The popover's rows.
    await page.click("#ring")
    row = page.locator(f"#popover [data-traj='{team.trajectory_id}'] .meta .eta")
    assert await row.inner_text() == "about 30 min left"
    assert await page.locator(f"#popover [data-traj='{other}'] .meta .eta").inner_text() == "time left unknown"
    await page.keyboard.press("Escape")
    # The panel's analysis listing.
    await page.click(f"[data-menu='{team.trajectory_id}']")
    await page.click(".menu li:text-is('Analyses')")
    listed = page.locator(f"#panel tr[data-analysis='{analysis}'] .frames")
    await listed.filter(has_text="20 to go").wait_for()
    assert "about 30 min left" in await listed.inner_text()
    assert await listed.locator(".eta").get_attribute("title") is None  # a figure needs no reason
    # One of its jobs holds (waits for a person): unknown, and the panel says why on hover, as the cards do.
    await pool.execute(
        "update jobs set status = 'holding' where id = (select min(id) from jobs where analysis_id = $1"
        " and status = 'queued')",
        analysis,
    )
    await listed.locator(".eta", has_text="time left unknown").wait_for(timeout=20_000)
    await page.wait_for_function(
        f"""(document.querySelector("#panel tr[data-analysis='{analysis}'] .eta").title || '')"""
        ".startsWith('unknown: a job is holding')",
        timeout=20_000,
    )
    await pool.execute("update jobs set status = 'queued' where analysis_id = $1 and status = 'holding'", analysis)
    await listed.filter(has_text="about 30 min left").wait_for(timeout=20_000)
    # The Submissions page: the upload's frames first, then the analyses behind them; done work says nothing.
    upload, analyses = [
        await pool.fetchval("select id from submissions where key = $1", f"trajectory:{team.trajectory_id}:{work}")
        for work in ("upload", "analysis")
    ]
    await page.goto(f"{stack.nodes[0].http}/submissions")
    eta = "tr[data-sub='{}'] td[data-col='eta']"
    await page.locator(eta.format(upload), has_text="about 20 min").wait_for()
    assert await page.locator(eta.format(analyses)).inner_text() == "about 30 min"
    assert await page.locator("th[data-col='eta']").inner_text() == "TIME LEFT"
    rasterize = await pool.fetchval("select submission_id from jobs where trajectory_id = $1", other)
    cell = page.locator(eta.format(rasterize))
    assert await cell.inner_text() == "unknown"
    assert (await cell.get_attribute("title") or "").startswith(why.format("tasks"))
    assert await page.locator("th[data-col='eta'] .sort").count() == 0  # a heading, not a sort
    # The work done: the figures go.
    await pool.execute(
        "update jobs set status = 'completed' where trajectory_id = $1 and status = 'queued'", team.trajectory_id
    )
    await page.wait_for_function(
        f"document.querySelector(\"tr[data-sub='{upload}'] td[data-col='eta']\").textContent === ''"
    )
