"""Columns and views of one's own on the Submissions page, in real Chromium: hide and move a column with the
Columns control's keyboard buttons, size one by its handle, save it all as a view, and find that view again in
another browser (a fresh context: nothing of the first browser's storage), where the page opens on it."""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.browser.helpers import sign_in
from tests.browser.test_submissions_lifecycle import submission
from tests.conftest import Stack
from tests.integration.conftest import Team

HEADERS = """() => [...document.querySelectorAll('table.submissions thead th')].filter(th => !th.hidden)
  .map(th => th.dataset.col).join()"""
CELLS = """() => [...document.querySelector('tbody tr[data-sub]').children].filter(td => !td.hidden)
  .map(td => td.dataset.col).join()"""
DEFAULT = "id,user,status,project,title,priority,progress,eta,tasks,avg_frame,created_at"


async def test_a_column_hidden_and_moved_is_saved_as_a_view_that_follows_the_person(
    page: Any, browser: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    await submission(pool, team, "Render water box")
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.wait_for_selector("tbody tr[data-sub]")
    assert await page.evaluate(HEADERS) == DEFAULT
    top = await page.evaluate("document.querySelector('.table-scroll').getBoundingClientRect().top")

    # Hide PRIORITY, show CORES, then move TITLE up twice with the keyboard: header and rows follow, the table
    # does not move.
    await page.click(".columns-button")
    await page.click(".columns-panel [data-show='priority']")
    await page.click(".columns-panel [data-show='cores']")
    await page.focus(".columns-panel [data-move='-1'][data-key='title']")
    await page.keyboard.press("Enter")
    await page.keyboard.press("Enter")
    expected = "id,user,title,status,project,cores,progress,eta,tasks,avg_frame,created_at"
    await page.wait_for_function(f"({HEADERS})() === '{expected}' && ({CELLS})() === '{expected}'")
    assert await page.evaluate("document.querySelector('.table-scroll').getBoundingClientRect().top") == top
    await page.keyboard.press("Escape")

    # Widen TITLE by its handle, with the arrow keys.
    before = await page.evaluate("document.querySelector('th[data-col=title]').getBoundingClientRect().width")
    await page.focus("th[data-col=title] .resize")
    for _ in range(3):
        await page.keyboard.press("ArrowRight")
    await page.wait_for_function(
        f"document.querySelector('th[data-col=title]').getBoundingClientRect().width >= {before} + 40"
    )

    # Save as a view, the page's default.
    await page.click(".save-view")
    await page.fill("dialog[open] input[name=name]", "Titles first")
    await page.click("dialog[open] button[type=submit]")
    await page.wait_for_function(
        "[...document.querySelectorAll('.views-select option')].some(o => o.selected && o.textContent.includes('Titles first'))"
    )

    # Another browser: no storage of the first, the same person. The page opens on the view.
    other = await browser.new_context(viewport={"width": 1400, "height": 800}, bypass_csp=True)
    try:
        second = await other.new_page()
        await sign_in(second, stack.nodes[0].http, team.token)
        await second.goto(f"{stack.nodes[0].http}/submissions")
        await second.wait_for_selector("tbody tr[data-sub]")
        await second.wait_for_function(f"({HEADERS})() === '{expected}' && ({CELLS})() === '{expected}'")
        width = await second.evaluate("document.querySelector('th[data-col=title]').getBoundingClientRect().width")
        assert width >= before + 40
        assert "Titles first" in await second.evaluate(
            "document.querySelector('.views-select').selectedOptions[0].textContent"
        )
    finally:
        await other.close()


async def test_the_default_columns_fit_their_words_at_1400_px(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """The demo's longest words in each default column: a member's name, a project, a pipeline's title, progress
    in the hundreds, TIME LEFT's longest words; none is cut short, and no header either."""
    await page.set_viewport_size({"width": 1400, "height": 900})
    await pool.execute("update users set name = 'Rosalind Franklin' where id = $1", team.user_id)
    sid = await submission(pool, team, "Pipeline run: RDF, MSD")
    await pool.execute("update submissions set project = 'ion channels', priority = -1000 where id = $1", sid)
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status)"
        " select $1, $2, $3, 'analysis', 'Analysis frame', f, $4, case when f < 114 then 'completed' else 'running' end"
        " from generate_series(0, 117) f",
        team.id,
        team.trajectory_id,
        team.cluster_id,
        sid,
    )
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.wait_for_function(
        "document.querySelector('tbody tr[data-sub] .done-words')?.textContent === '114/118 done'"
    )
    await page.evaluate("document.querySelector('tbody td[data-col=eta]').textContent = 'less than a minute'")
    cut = await page.evaluate(
        """() => {
          const heads = [...document.querySelectorAll('thead th')];
          heads.forEach(th => th.setAttribute('aria-sort', 'descending'));  // with a sort's arrow
          const cells = [...document.querySelectorAll('thead th .sort, thead th .heading, tbody td')];
          return cells.filter(e => !e.closest('[hidden]') && e.scrollWidth > e.clientWidth)
            .map(e => `${e.closest('[data-col]').dataset.col}: ${e.textContent}`);
        }"""
    )
    assert cut == [], cut


OPTIONS = "() => [...document.querySelectorAll('.views-select option')].slice(1).map(o => o.textContent).join('|')"
LISTED = "() => [...document.querySelectorAll('.views-order .view-name')].map(e => e.textContent).join('|')"


async def test_views_are_renamed_and_reordered_by_keyboard_and_by_drag_and_the_order_is_kept(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    await submission(pool, team, "Render water box")
    view = {"columns": [{"key": "id"}, {"key": "title"}]}
    for name in ("Alpha", "Bravo", "Charlie"):
        answer = await page.request.post(
            f"{stack.nodes[0].http}/api/teams/{team.id}/views",
            data={"name": name, "default": False, "view": view},
            headers={"Origin": stack.nodes[0].http},
        )
        assert answer.ok, await answer.text()
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.wait_for_function(f"({OPTIONS})() === 'Alpha|Bravo|Charlie'")
    await page.click(".manage-views")
    await page.wait_for_selector("dialog.views-manager[open]")
    assert await page.evaluate(LISTED) == "Alpha|Bravo|Charlie"

    # By keyboard: Alpha's ↓ twice (focus stays on the button pressed, then goes to ↑ at the end).
    await page.focus(".views-order [data-view] [data-move='1']")
    await page.keyboard.press("Enter")
    await page.keyboard.press("Enter")
    await page.wait_for_function(f"({LISTED})() === 'Bravo|Charlie|Alpha'")
    assert await page.evaluate("document.activeElement.getAttribute('aria-label')") == "Move Alpha up"
    # By drag: Charlie's handle to the top.
    handle = await page.locator(".views-order li:has-text('Charlie') .handle").bounding_box()
    top = await page.locator(".views-order li").first.bounding_box()
    await page.mouse.move(handle["x"] + 4, handle["y"] + 4)
    await page.mouse.down()
    await page.mouse.move(handle["x"] + 4, top["y"] + 2, steps=6)
    await page.mouse.up()
    await page.wait_for_function(f"({LISTED})() === 'Charlie|Bravo|Alpha'")
    # Rename Bravo: it keeps its place.
    await page.click(".views-order li:has-text('Bravo') [data-rename]")
    await page.fill("dialog[open] input[name=name]", "Bravo renamed")
    await page.click("dialog[open] button[type=submit]")
    await page.wait_for_function(f"({LISTED})() === 'Charlie|Bravo renamed|Alpha'")
    await page.keyboard.press("Escape")
    await page.wait_for_selector("dialog.views-manager", state="detached")
    await page.wait_for_function(f"({OPTIONS})() === 'Charlie|Bravo renamed|Alpha'")
    # Kept on the server: the page read again lists them in that order.
    await page.reload()
    await page.wait_for_function(f"({OPTIONS})() === 'Charlie|Bravo renamed|Alpha'")
