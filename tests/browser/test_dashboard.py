"""The dashboard is about the work in hand: active trajectories first, finished ones folded, the ring filled
with the work in flight; at 1400 and 360 px."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.browser.helpers import axe_violations
from tests.integration.conftest import Team, insert_jobs


@pytest.mark.parametrize("width", [1400, 360])
async def test_the_work_in_hand_leads_and_what_is_over_is_folded(
    page: Any, pool: asyncpg.Pool, team: Team, width: int
) -> None:
    await page.set_viewport_size({"width": width, "height": 800})
    earlier = await pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, 'Morning batch') returning id", team.id
    )
    done = await insert_jobs(pool, team, 4, earlier)
    await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", done)
    fold = page.locator(".finished-fold")
    await fold.locator("summary", has_text="1 finished in the last hour").wait_for()
    finished = fold.locator(f"[data-card='{earlier}']")
    assert not await finished.is_visible()  # folded until asked for

    # New work starts after the morning's batch finished: the ring counts only it, 1 of 4 done (not 5 of 8).
    ids = await insert_jobs(pool, team, 4)
    await pool.execute("update jobs set status = 'completed' where id = $1", ids[0])
    await page.wait_for_function("document.getElementById('ring-label').textContent === '3 queued'")
    await page.wait_for_function("document.getElementById('ring-fill').getAttribute('stroke-dasharray') === '25 100'")
    active = page.locator(f".cards:not(.finished-cards) [data-card='{team.trajectory_id}']")
    # Read as a person reads it, on screen (a card out of view is not drawn: content-visibility: auto).
    await active.scroll_into_view_if_needed()
    assert "1/4 jobs" in await active.locator(".progress").inner_text()
    assert (await active.locator(".meta").inner_text()).count("queued") == 1

    await fold.locator("summary").click()
    await finished.wait_for()
    await finished.scroll_into_view_if_needed()
    meta = await finished.locator(".meta").inner_text()
    assert "4/4 jobs" in meta and meta.count("completed") == 1  # the status word once, not "completed completed"
    assert await axe_violations(page) == []

    # Everything done: the ring is full.
    await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
    await page.wait_for_function("document.getElementById('ring-fill').getAttribute('stroke-dasharray') === '100 100'")
    await fold.locator("summary", has_text="2 finished in the last hour").wait_for()


@pytest.mark.parametrize("width", [1400, 360])
async def test_the_header_is_one_row_and_every_page_is_reachable(page: Any, width: int) -> None:
    await page.set_viewport_size({"width": width, "height": 740})
    header = await page.locator("header").bounding_box()
    assert header["height"] < 60  # one row: the team, freshness, ring, bell (and at 360 the menu button)
    for sel in ("#team-switch", "#ring", ".bell"):
        box = await page.locator(sel).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width and box["y"] < header["height"], sel
    team = await page.locator("#team-switch").bounding_box()
    assert team["width"] >= 100  # the team's name is readable, not cut to four letters
    if width == 360:
        assert not await page.locator("header nav").is_visible()
        await page.click("#nav-toggle")
        assert await page.get_attribute("#nav-toggle", "aria-expanded") == "true"
        assert await page.locator("#sign-out").is_visible()
        assert await axe_violations(page) == []
    await page.click("header nav >> text=Clusters")
    await page.wait_for_function("location.hash === '#/clusters'")
    assert not await page.locator("#sign-out").is_visible() or width == 1400  # the sheet closed with the choice
    reporting = await page.locator("main th", has_text="Reporting").bounding_box()
    assert reporting["x"] + reporting["width"] <= width  # every column on screen
    assert await axe_violations(page) == []
