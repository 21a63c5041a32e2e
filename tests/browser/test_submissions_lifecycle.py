"""The submission lifecycle on the Submissions page, in real Chromium: how a submission moves (the lifecycle
diagram, from the page and from STATUS's header), Retry Sync on a task, and a task panel whose counts are those of
the rows it lists."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from gateway.core.lifecycle import START, STATUS_COLOURS, TRANSITIONS
from gateway.core.submission import SUBMISSION_STATUSES
from gateway.sim.cluster import SimCluster
from tests.browser.helpers import axe_violations, layout_problems, open_groups, unfold
from tests.conftest import Stack
from tests.integration.conftest import Team

SHOWN = "() => [...document.querySelectorAll('tbody tr[data-sub]')].map(e => Number(e.dataset.sub)).join()"


async def submission(pool: asyncpg.Pool, team: Team, title: str, staging: str = "ready") -> int:
    sid: int = await pool.fetchval(
        "insert into submissions (team_id, trajectory_id, cluster_id, user_id, title, staging)"
        " values ($1, $2, $3, $4, $5, $6) returning id",
        team.id,
        team.trajectory_id,
        team.cluster_id,
        team.user_id,
        title,
        staging,
    )
    return sid


async def tasks(pool: asyncpg.Pool, team: Team, rows: list[tuple[str, str, int, str, int | None]]) -> list[int]:
    """Plain INSERTs, as the platform writes: (kind, name, frame, status, submission or None: derived)."""
    return [
        await pool.fetchval(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, timestep, status, submission_id)"
            " values ($1, $2, $3, $4, $5, $6::int, $6::int * 0.5, $7, $8) returning id",
            team.id,
            team.trajectory_id,
            team.cluster_id,
            kind,
            name,
            frame,
            status,
            sid,
        )
        for kind, name, frame, status, sid in rows
    ]


async def dialog_shows_the_table(page: Any) -> None:
    await page.wait_for_selector("dialog.lifecycle[open] svg g.status")
    drawn = await page.evaluate("""() => ({
        statuses: [...document.querySelectorAll('dialog.lifecycle svg g.status')].map(g => g.dataset.status),
        moves: [...document.querySelectorAll('dialog.lifecycle svg g.transition')]
          .map(g => [g.dataset.source, g.dataset.target, g.querySelector('text').textContent]),
    })""")
    assert drawn["statuses"] == list(SUBMISSION_STATUSES)
    assert drawn["moves"] == [[t.source, t.target, t.label] for t in TRANSITIONS]


async def test_how_a_submission_moves_opens_from_the_page_and_from_the_status_header(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    a = await submission(pool, team, "Render A", staging="syncing")
    b = await submission(pool, team, "Render B", staging="sync_failed")
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.wait_for_function(f"({SHOWN})() === '{b},{a}'")  # newest first
    # The link in the toolbar: a dialog over the page (no navigation), the diagram inline, focus on Close.
    await page.click("a.lifecycle-link")
    await dialog_shows_the_table(page)
    assert page.url.endswith("/submissions")
    assert await page.evaluate("document.activeElement.textContent") == "Close"
    name = await page.evaluate(
        "document.getElementById(document.querySelector('dialog.lifecycle').getAttribute('aria-labelledby')).textContent"
    )
    assert name == "How a submission moves"
    assert await axe_violations(page) == []
    assert await layout_problems(page, "dialog.lifecycle") == []
    # Each status in the page's own colour: the diagram's box and word are what the STATUS column shows.
    colours = await page.evaluate("""async () => {
        const { STATUS_COLOUR } = await import('/js/submissions.js');
        const probe = document.createElement('span');
        document.body.append(probe);
        const out = {};
        for (const g of document.querySelectorAll('dialog.lifecycle svg g.status')) {
          probe.className = STATUS_COLOUR[g.dataset.status] || '';
          out[g.dataset.status] = [STATUS_COLOUR[g.dataset.status] || '', getComputedStyle(probe).color,
            getComputedStyle(g.querySelector('text')).fill];
        }
        probe.remove();
        return out;
    }""")
    for status, (page_colour, css, svg) in colours.items():
        assert page_colour == STATUS_COLOURS[status], status
        assert css == svg, (status, css, svg)
    # While it is open the lists behind it hold still, as behind every dialog of the page.
    assert await page.evaluate("async () => (await import('/js/ui.js')).dialogOpen()") is True
    await page.keyboard.press("Escape")  # closes the dialog, and only that
    await page.wait_for_selector("dialog.lifecycle", state="detached")
    assert await page.evaluate("async () => (await import('/js/ui.js')).dialogOpen()") is False
    assert await page.evaluate("document.activeElement.classList.contains('lifecycle-link')")
    # The help button beside STATUS's sort button: the same dialog; sorting is still the sort button's.
    help_button = page.locator("th[data-col='status'] button.col-help")
    assert await help_button.get_attribute("aria-label") == "How a submission moves through its statuses"
    await help_button.click()
    await dialog_shows_the_table(page)
    assert await page.get_attribute("th[data-col='status']", "aria-sort") is None  # the help sorted nothing
    await page.click("dialog.lifecycle button.close")
    await page.wait_for_selector("dialog.lifecycle", state="detached")
    assert await page.evaluate("document.activeElement.classList.contains('col-help')")
    await page.click("button[data-sort='status']")
    await page.wait_for_function(f"({SHOWN})() === '{b},{a}' && location.search.includes('sort=status')")
    assert await page.get_attribute("th[data-col='status']", "aria-sort") == "ascending"  # sync_failed < syncing
    await page.click("button[data-sort='status']")
    await page.wait_for_function(f"({SHOWN})() === '{a},{b}'")
    assert await page.get_attribute("th[data-col='status']", "aria-sort") == "descending"
    # By keyboard too: the help button is in the tab order, Enter opens it.
    await help_button.focus()
    await page.keyboard.press("Enter")
    await dialog_shows_the_table(page)
    await page.keyboard.press("Escape")
    await page.wait_for_selector("dialog.lifecycle", state="detached")


# At a width: how far the page and the diagram's box scroll sideways, whether the picture shows, and the statuses
# and moves laid out downwards with their smallest font size.
NARROW = """() => {
  const box = document.querySelector('dialog.lifecycle .diagram');
  const steps = [...box.querySelectorAll('.steps > .step')];
  const sizes = [...box.querySelectorAll('.steps *')].filter((e) => e.childNodes.length && [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim()))
    .map((e) => parseFloat(getComputedStyle(e).fontSize));
  return {
    page: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    diagram: box.scrollWidth - box.clientWidth,
    dialog: document.querySelector('dialog.lifecycle').scrollWidth - document.querySelector('dialog.lifecycle').clientWidth,
    picture: getComputedStyle(box.querySelector('svg')).display !== 'none',
    listed: !!steps.length && getComputedStyle(box.querySelector('.steps')).display !== 'none',
    statuses: steps.map((s) => s.dataset.status),
    moves: [...box.querySelectorAll('.steps .move')].map((m) => [m.dataset.source, m.dataset.target, m.querySelector('.label').textContent]),
    smallest: Math.min(...sizes),
  };
}"""


async def test_at_360_px_the_diagram_reads_downwards_without_scrolling_sideways(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    await submission(pool, team, "Render A")
    await page.set_viewport_size({"width": 360, "height": 760})
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.wait_for_selector("tr[data-sub]")
    await page.click("a.lifecycle-link")
    await page.wait_for_selector("dialog.lifecycle[open] .steps .move")
    shown = await page.evaluate(NARROW)
    # Nothing scrolls sideways, not the page, the dialog or the diagram's box; every word at 12 px or more.
    assert (shown["page"], shown["dialog"], shown["diagram"]) == (0, 0, 0), shown
    assert shown["smallest"] >= 12, shown
    # Every status and every move of the table, in the table's order: the picture's words, downwards.
    assert not shown["picture"] and shown["listed"]
    assert shown["statuses"] == [START, *SUBMISSION_STATUSES]
    by_source = sorted(TRANSITIONS, key=lambda t: shown["statuses"].index(t.source))
    assert shown["moves"] == [[t.source, t.target, t.label] for t in by_source]
    assert await layout_problems(page, "dialog.lifecycle") == []
    # Three screens of statuses: the diagram's box scrolls, the heading and Close stay in the window.
    for part in ("#lifecycle-heading", "dialog.lifecycle button.close"):
        assert await page.locator(part).evaluate("(e) => e.getBoundingClientRect().bottom <= innerHeight"), part
    assert await page.evaluate(
        "(() => { const b = document.querySelector('dialog.lifecycle .diagram'); return b.scrollHeight > b.clientHeight; })()"
    )
    assert await axe_violations(page) == []
    await page.keyboard.press("Escape")
    # At 1400 px the picture as before: drawn, nothing listed, nothing scrolling.
    await page.set_viewport_size({"width": 1400, "height": 900})
    await page.click("a.lifecycle-link")
    await dialog_shows_the_table(page)
    shown = await page.evaluate(NARROW)
    assert shown["picture"] and not shown["listed"] and (shown["page"], shown["diagram"]) == (0, 0), shown


async def test_retry_sync_is_on_a_tasks_menu_while_its_submissions_sync_failed(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    cluster = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await cluster.start()
    try:
        sid = await cluster.create_submission(
            title="Render of frames 0-1", trajectory_id=team.trajectory_id, user_id=team.user_id, staging="sync_failed"
        )
        await cluster.submit(
            [
                {
                    "trajectory_id": team.trajectory_id,
                    "kind": "analysis",
                    "name": "Render",
                    "frame": f,
                    "submission_id": sid,
                }
                for f in range(2)
            ]
        )
        retried = cluster.sync_failed[sid] = asyncio.Event()  # this cluster failed to sync it: it confirms the retry
        row = f"tr[data-sub='{sid}']"
        await page.goto(f"{stack.nodes[0].http}/submissions")
        await page.wait_for_function(
            f"document.querySelector(\"{row} td[data-col='status']\")?.textContent === 'sync_failed'"
        )
        await page.dblclick(row)
        await open_groups(page, "#panel", 2)
        await page.wait_for_function("document.querySelectorAll('#panel .row.job').length === 2")
        await page.click("#panel .row.job >> nth=0", button="right")
        items = await page.eval_on_selector_all(".menu li", "els => els.map(e => e.textContent)")
        assert items == ["Hold", "Unhold", "Kill", "Retry", "Retry Failed", "Retry Preempted", "Retry Sync"]
        await page.click(".menu li:text-is('Retry Sync')")  # as on the submission's menu: no question, a toast
        await page.locator(".toast.success", has_text="Retrying sync of 1 submission(s)").wait_for()
        assert retried.is_set()
        await page.wait_for_function(
            f"document.querySelector(\"{row} td[data-col='status']\").textContent === 'syncing'"
        )
        assert await pool.fetchval("select staging from submissions where id = $1", sid) == "syncing"
        # Its sync no longer failed: the task's menu no longer offers it.
        await page.click("#panel .row.job >> nth=0", button="right")
        items = await page.eval_on_selector_all(".menu li", "els => els.map(e => e.textContent)")
        assert "Retry Sync" not in items
        await page.keyboard.press("Escape")
    finally:
        await cluster.stop()


# In the page: each group row of a tree and the job rows listed under it (their count, and how many completed).
LISTED = """(scope) => {
  const out = [];
  for (const el of document.querySelectorAll(`${scope} .tree .rows > [data-key]`)) {
    if (el.dataset.kind === 'group') {
      out.push({ group: el.dataset.group, count: el.querySelector('.count').textContent,
                 status: el.querySelector('.status').textContent, rows: 0, completed: 0 });
    } else {
      out[out.length - 1].rows += 1;
      if (el.querySelector('.status').textContent === 'completed') out[out.length - 1].completed += 1;
    }
  }
  return out;
}"""


async def listed(page: Any, scope: str, groups: int, jobs: int) -> list[dict[str, Any]]:
    await open_groups(page, scope, groups)
    await page.wait_for_function(f"document.querySelectorAll('{scope} .row.job').length === {jobs}")
    shown: list[dict[str, Any]] = await page.evaluate(LISTED, scope)
    return shown


async def test_a_panels_counts_are_those_of_the_rows_it_lists(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """Frame 1 holds the upload's task and two of a render's: the render's panel reads 0/2 over its two rows (it
    read the frame's 1/3), the trajectory's panel 1/3 over all three."""
    render = await submission(pool, team, "Render of frame 1")
    await tasks(
        pool,
        team,
        [
            ("preprocess", "Preprocess trajectory frame", 0, "completed", None),
            ("preprocess", "Preprocess trajectory frame", 1, "completed", None),
            ("analysis", "Render pass A", 1, "failed", render),
            ("analysis", "Render pass B", 1, "failed", render),
        ],
    )
    base = stack.nodes[0].http
    await page.goto(f"{base}/submissions")
    await page.wait_for_selector(f"tr[data-sub='{render}']")
    await page.dblclick(f"tr[data-sub='{render}']")
    shown = await listed(page, "#panel", 1, 2)
    assert shown == [{"group": "frame:1", "count": "0/2", "status": "failed", "rows": 2, "completed": 0}]
    await page.click("#panel-close")
    await page.goto(f"{base}/")
    await unfold(page, team.trajectory_id)
    await page.click(f"[data-menu='{team.trajectory_id}']")
    await page.click(".menu li:text-is('Compute jobs')")
    shown = await listed(page, "#panel", 2, 4)
    assert [s["group"] for s in shown] == ["frame:0", "frame:1"]
    for s in shown:  # every count is that of the rows under it
        assert s["count"] == f"{s['completed']}/{s['rows']}", s
    assert shown[1]["status"] == "partly failed"
