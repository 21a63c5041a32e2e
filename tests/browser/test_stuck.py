"""Work that is stuck, in real Chromium: a job running far longer than its kind usually takes on its cluster is
named on its row ("running 5× longer than usual"), counted in the popover, and told once to whoever submitted it."""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.integration.conftest import Team

STUCK = "running 5× longer than usual"


async def test_a_job_running_far_longer_than_usual_is_named_counted_and_told_once_to_its_submitter(
    page: Any, pool: asyncpg.Pool, team: Team
) -> None:
    other = await pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, 'Slow grain') returning id", team.id
    )
    mine = await pool.fetchval(
        "insert into submissions (team_id, trajectory_id, user_id, title) values ($1, $2, $3, 'my run') returning id",
        team.id,
        other,
        team.user_id,
    )
    jobs = """
        insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status, started_at,
                          finished_at)
        select $1, $2, $3, 'rasterize', 'rasterize', f, $4, $5, now() - make_interval(secs => $6),
               case when $5 = 'completed' then now() - make_interval(secs => $6 - 600) end
        from generate_series($7::int, $7 + $8 - 1) f
        returning id
    """
    # What the cluster did already: rasterizing took 10 min a frame ...
    await pool.fetch(jobs, team.id, other, team.cluster_id, None, "completed", 1200.0, 0, 5)
    # ... and now: one of the person's own jobs has run 50 min (5 times as long), a teammate's too, and one
    # started a minute ago runs as usual.
    (stuck,) = await pool.fetch(jobs, team.id, other, team.cluster_id, mine, "running", 3000.0, 10, 1)
    await pool.fetch(jobs, team.id, team.trajectory_id, team.cluster_id, None, "running", 3000.0, 20, 1)
    (fine,) = await pool.fetch(jobs, team.id, other, team.cluster_id, mine, "running", 60.0, 30, 1)

    # Told once, to the person whose submission it is.
    told = page.locator("#toasts .toast[data-kind='stuck']")
    await told.filter(has_text=f"A job of yours is {STUCK}").wait_for(timeout=30_000)
    assert "Slow grain" in await told.inner_text()

    # The popover counts them both, and the job's row says so.
    await page.click("#ring")
    await page.locator("#popover .pop-stuck", has_text="2 running longer than usual").wait_for()
    await page.click(f"#popover [data-head='{other}']")
    for frame in (10, 30):
        await page.click(f"#popover [data-group='frame:{frame}']")
    row = page.locator(f"#popover [data-job='{stuck['id']}'] .meta-line .stuck")
    assert await row.inner_text() == STUCK
    await page.locator(f"#popover [data-job='{fine['id']}']").wait_for()
    assert await page.locator(f"#popover [data-job='{fine['id']}'] .stuck").count() == 0
    # At 360 px the count is cut short in the title bar's one line (its words on hover): nothing below it moves.
    await page.set_viewport_size({"width": 360, "height": 760})
    bar = "document.querySelector('#popover .pop-bar')"
    await page.wait_for_function(f"{bar}.getBoundingClientRect().width < 360")
    assert await page.evaluate(f"{bar}.getBoundingClientRect().height") <= 1.9 * 16 + 0.5
    assert await page.get_attribute("#popover .pop-stuck", "title") == "2 running longer than usual"
    await page.set_viewport_size({"width": 1200, "height": 800})
    await page.keyboard.press("Escape")

    # The trajectory's panel says it on the job's row too.
    await page.click(f"[data-menu='{other}']")
    await page.click(".menu li:text-is('Compute jobs')")
    for frame in (10, 30):
        await page.click(f"#panel [data-group='frame:{frame}']")
    await page.locator(f"#panel [data-job='{stuck['id']}'] .stuck", has_text=STUCK).wait_for()

    # More summaries come (another job changes): the person is not told again, not even after a reload.
    await pool.execute("update jobs set status = 'completed', finished_at = now() where id = $1", fine["id"])
    await page.locator(f"#panel [data-job='{fine['id']}'] .status", has_text="completed").wait_for()
    await page.reload()
    await page.wait_for_function("document.body.dataset.live === 'live'")
    await page.click("#ring")
    await page.locator("#popover .pop-stuck", has_text="2 running longer than usual").wait_for()
    assert await page.locator("#toasts .toast[data-kind='stuck']").count() == 0
    entries = await page.evaluate("JSON.parse(localStorage.getItem('jobs.stuck.' + window.gatewayApp.me.user.id))")
    assert entries == [stuck["id"]]
