"""The Activity page in real Chromium: an owner reads who did what (24-hour times, grouped thousands), filters it by
action and downloads it; a member is told it is for owners and admins."""

from __future__ import annotations

from typing import Any

import asyncpg

from gateway.store import activity
from tests.conftest import Stack
from tests.integration.conftest import Team


async def test_an_owner_reads_who_did_what_and_a_member_is_told_it_is_not_theirs(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    base = stack.nodes[0].http
    await page.goto(f"{base}/#/activity")
    await page.get_by_text("Only the team's owners and admins see its activity.").wait_for()
    await pool.execute(
        "update memberships set role = 'owner' where team_id = $1 and user_id = $2", team.id, team.user_id
    )
    name = await pool.fetchval("select name from users where id = $1", team.user_id)
    await activity.record(pool, team.id, team.user_id, "kill", 1234, ["gpu-2"], "submission:7")
    await activity.record(pool, team.id, None, "rotate_key", 1, ["gpu-1"])
    await page.goto(f"{base}/#/team")
    await page.get_by_role("link", name="Activity").click()
    rows = page.locator("table.activity tbody tr")
    await rows.nth(1).wait_for()
    texts = [await r.inner_text() for r in await rows.all()]
    assert "Rotated a cluster key" in texts[0] and activity.CLI in texts[0]
    assert all(s in texts[1] for s in (name, "Killed", "1,234", "gpu-2", "submission:7"))
    assert ":" in texts[1].split("\t")[0] and "M" not in texts[1].split("\t")[0]  # 24-hour time, no AM/PM
    await page.select_option("select.activity-action", "kill")
    await page.wait_for_function("document.querySelectorAll('table.activity tbody tr').length === 1")
    href = await page.get_attribute("a.activity-csv", "href")
    assert href == f"/api/teams/{team.id}/activity.csv?action=kill"
    for width in (1400, 360):
        await page.set_viewport_size({"width": width, "height": 800})
        await page.screenshot(path=f"/tmp/activity-{width}.png")
