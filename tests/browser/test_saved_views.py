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
ALL = "id,user,status,project,title,priority,cores,memory_gb,preemptible,progress,eta,tasks,avg_frame,created_at"


async def test_a_column_hidden_and_moved_is_saved_as_a_view_that_follows_the_person(
    page: Any, browser: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    await submission(pool, team, "Render water box")
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.wait_for_selector("tbody tr[data-sub]")
    assert await page.evaluate(HEADERS) == ALL
    top = await page.evaluate("document.querySelector('.table-scroll').getBoundingClientRect().top")

    # Hide CORES, then move TITLE up twice with the keyboard: header and rows follow, the table does not move.
    await page.click(".columns-button")
    await page.click(".columns-panel [data-show='cores']")
    await page.focus(".columns-panel [data-move='-1'][data-key='title']")
    await page.keyboard.press("Enter")
    await page.keyboard.press("Enter")
    expected = ALL.replace("cores,", "").replace("status,project,title", "title,status,project")
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
