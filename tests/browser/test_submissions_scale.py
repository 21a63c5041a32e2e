"""The Submissions page past every old cap, in Chromium: more rows than the 500 it used to stop at, every one
reachable, sorted over all of them, the view in the address, rows that keep their height under a header that
stays, a click that lands on the row aimed at while rows stream, and a kill that asks first."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from gateway.store.submission_rows import EXACT_TO
from tests.conftest import Stack
from tests.integration.conftest import Team
from tests.integration.test_submission_windows import add_submissions, saved

N = 620
SHOWN = "() => [...document.querySelectorAll('tbody tr[data-sub]')].map(e => Number(e.dataset.sub))"


@pytest.fixture
async def many(pool: asyncpg.Pool, stack: Stack, team: Team) -> list[int]:
    ids = await add_submissions(pool, team, N)
    await saved(stack, team, N)
    return ids


async def row_indexes(page: Any) -> list[Any]:
    """The grid's aria-rowcount, its header's aria-rowindex and its rows' (a page of rows of all of them)."""
    indexes: list[Any] = await page.evaluate("""() => [
      document.querySelector('table.submissions').getAttribute('aria-rowcount'),
      document.querySelector('table.submissions thead tr').getAttribute('aria-rowindex'),
      [...document.querySelectorAll('tbody tr[data-sub]')].map(e => Number(e.getAttribute('aria-rowindex')))]""")
    return indexes


async def range_text(page: Any, text: str) -> None:
    await page.wait_for_function(f"document.querySelector('.pager .range')?.textContent === {text!r}")


async def test_every_row_is_reachable_and_sorting_covers_them_all(
    page: Any, stack: Stack, team: Team, many: list[int]
) -> None:
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await range_text(page, "1–100 of 620")
    assert len(await page.evaluate(SHOWN)) == 100
    assert await row_indexes(page) == ["621", "1", list(range(2, 102))]  # a page of the grid's rows, said as one
    await page.click("button[data-sort='id']")  # JOB ID, ascending: the first row is the smallest of all
    await page.wait_for_function(f"({SHOWN})()[0] === {min(many)}")
    await page.click(".pager [data-go='last']")
    await range_text(page, "601–620 of 620")
    assert (await page.evaluate(SHOWN))[-1] == max(many)
    assert await row_indexes(page) == ["621", "1", list(range(602, 622))]
    # Rows that left drew those that came: each says its own submission.
    ids = await page.eval_on_selector_all("tbody td[data-col='id']", "els => els.map(e => Number(e.textContent))")
    assert ids == await page.evaluate(SHOWN)
    assert await page.is_disabled(".pager [data-go='next']")
    await page.click(".pager [data-go='prev']")
    await range_text(page, "501–600 of 620")

    await page.fill("input[name='q']", "shot 061")  # 0610..0619: the search runs on the server
    await range_text(page, "1–10 of 10")
    await page.select_option("select[data-filter='project']", "p1")  # 0613 and 0617
    await range_text(page, "1–2 of 2")
    assert "q=shot+061" in page.url and "project=p1" in page.url
    await page.reload()  # a reload (or a shared link) opens the same view
    await page.wait_for_function("window.gatewayLive && document.body.dataset.live === 'live'")
    await range_text(page, "1–2 of 2")
    assert await page.input_value("input[name='q']") == "shot 061"
    assert await page.input_value("select[data-filter='project']") == "p1"
    titles = await page.eval_on_selector_all("tbody td[data-col='title']", "els => els.map(e => e.textContent)")
    assert titles == ["Render shot 0613", "Render shot 0617"]
    href = await page.get_attribute(".export", "href")
    assert href.startswith(f"/api/teams/{team.id}/submissions.csv?") and "project=p1" in href
    text = await page.evaluate("async (h) => (await fetch(h)).text()", href)
    records = list(csv.reader(io.StringIO(text)))[1:]
    assert records and [record[4] for record in records] == titles


async def test_rows_keep_their_height_and_the_header_stays(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, many: list[int]
) -> None:
    await page.set_viewport_size({"width": 1400, "height": 900})
    await pool.execute(
        "update submissions set title = $2 where id = $1", many[0], "Copper grain run " + "very long title " * 8
    )
    # Rows with tasks (a bar and its words) and rows without: one height all the same.
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status)"
        " select $1, $2, $3, 'analysis', 'Analysis frame', f, s, (array['running', 'completed', 'failed'])[f % 3 + 1]"
        " from unnest($4::bigint[]) s, generate_series(0, 5) f",
        team.id,
        team.trajectory_id,
        team.cluster_id,
        many[1:6],
    )
    await page.goto(f"{stack.nodes[0].http}/submissions?sort=id&dir=asc")
    await page.wait_for_function(f"({SHOWN})().length === 100")
    heights = await page.eval_on_selector_all(
        "tbody tr[data-sub]", "els => [...new Set(els.map(e => Math.round(e.getBoundingClientRect().height)))]"
    )
    assert len(heights) == 1, heights  # one line each, the long title cut with its full text on hover
    title = f"tr[data-sub='{many[0]}'] td[data-col='title']"  # live: the change arrives on the team channel
    await page.wait_for_function(f"document.querySelector(\"{title}\")?.title.startsWith('Copper grain run very long')")
    words = f"tr[data-sub='{many[5]}'] .done-words"
    await page.wait_for_function(f"document.querySelector(\"{words}\")?.textContent === '2/6 done'")
    heights = await page.eval_on_selector_all(
        "tbody tr[data-sub]", "els => [...new Set(els.map(e => Math.round(e.getBoundingClientRect().height)))]"
    )
    assert len(heights) == 1, heights
    box = page.locator(".table-scroll")
    widths = await box.evaluate("b => [b.scrollWidth, b.clientWidth]")
    assert widths[0] <= widths[1], f"every column fits at 1400 px: the table needs {widths[0]} px of {widths[1]}"
    cut = await page.evaluate(  # and nothing in a header (sorted by it: with its arrow) or PROGRESS is cut short
        """() => {
          const heads = [...document.querySelectorAll('thead th')];
          const sorted = heads.map(th => th.getAttribute('aria-sort'));
          heads.forEach(th => th.setAttribute('aria-sort', 'descending'));
          const cut = [...document.querySelectorAll('thead th .sort, td[data-col=progress]')]
            .filter(e => e.scrollWidth > e.clientWidth).map(e => e.textContent);
          heads.forEach((th, i) => sorted[i] === null ? th.removeAttribute('aria-sort') : th.setAttribute('aria-sort', sorted[i]));
          return cut;
        }"""
    )
    assert cut == [], cut
    header = await page.locator("thead th").first.bounding_box()
    await box.evaluate("b => { b.scrollTop = 1200; }")
    await page.wait_for_function("document.querySelector('.table-scroll').scrollTop > 1000")
    assert await page.locator("thead th").first.bounding_box() == header  # the header stays in place
    for width in (768, 360):
        await page.set_viewport_size({"width": width, "height": 800})
        page_width = await page.evaluate("document.documentElement.scrollWidth")
        assert page_width <= width, f"the page scrolls sideways at {width} px"
        assert await box.evaluate("b => b.scrollWidth > b.clientWidth")  # the table does, inside its box


async def stream(pool: asyncpg.Pool, team: Team, ids: list[int], stop: asyncio.Event) -> None:
    """Tasks changing on the page's rows, several times a second, until `stop`."""
    jobs = [
        r["id"]
        for r in await pool.fetch(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id)"
            " select $1, $2, $3, 'analysis', 'Analysis frame', f, s from unnest($4::bigint[]) s,"
            " generate_series(0, 3) f returning id",
            team.id,
            team.trajectory_id,
            team.cluster_id,
            ids,
        )
    ]
    step = 0
    while not stop.is_set():
        chunk = jobs[(step * 37) % len(jobs) :][:40]
        await pool.execute(
            "update jobs set status = $2 where id = any($1::bigint[])", chunk, ("running", "completed")[step % 2]
        )
        step += 1
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def streaming(pool: asyncpg.Pool, team: Team, ids: list[int]) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(stream(pool, team, ids, stop))
    try:
        yield
    finally:
        stop.set()
        await task


async def test_a_click_lands_on_the_row_aimed_at_while_rows_stream(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, many: list[int]
) -> None:
    # Sorted by progress: every change moves rows in the order, and new ones keep entering the window.
    await page.goto(f"{stack.nodes[0].http}/submissions?sort=progress&dir=desc")
    await page.wait_for_function(f"({SHOWN})().length === 100")
    async with streaming(pool, team, many[:150]):
        aimed = page.locator("tbody tr[data-sub]").nth(6)
        target = int(await aimed.get_attribute("data-sub"))
        box = await aimed.bounding_box()
        x, y = box["x"] + 40, box["y"] + box["height"] / 2
        await page.mouse.move(x, y)
        under = f"() => document.elementFromPoint({x}, {y}).closest('tr').dataset.sub"
        for _ in range(20):  # two seconds of changes with the pointer still
            await page.wait_for_timeout(100)
            assert await page.evaluate(under) == str(target)
        await page.wait_for_selector(".news:not([hidden])")  # what moved is announced, not shown under the pointer
        await page.mouse.click(x, y)
        assert await page.get_attribute(f"tr[data-sub='{target}']", "aria-selected") == "true"
        await page.mouse.move(5, 5)  # the pointer leaves: the window catches up by itself
        await page.wait_for_selector(".news", state="hidden")


async def test_kill_asks_first_and_escape_does_nothing(page: Any, stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    [sid] = await add_submissions(pool, team, 1)
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id, status)"
        " select $1, $2, $3, 'analysis', 'Analysis frame', f, $4, 'running' from generate_series(0, 2) f",
        team.id,
        team.trajectory_id,
        team.cluster_id,
        sid,
    )
    await page.goto(f"{stack.nodes[0].http}/submissions")
    row = f"tr[data-sub='{sid}']"
    await page.wait_for_function(f"document.querySelector(\"{row}\")?.innerText.includes('running')")
    await page.focus(row)
    await page.keyboard.press("Space")
    await page.keyboard.press("Shift+F10")  # the menu by keyboard
    await page.locator("role=menuitem[name='Kill']").focus()
    await page.keyboard.press("Enter")
    await page.locator("dialog h2", has_text="Kill 3 tasks of 1 submission on gpu-1?").wait_for()
    await page.keyboard.press("Escape")
    await page.wait_for_selector("dialog", state="detached")
    assert {r["status"] for r in await pool.fetch("select status from jobs where submission_id = $1", sid)} == {
        "running"
    }


async def test_a_total_past_100000_reads_as_an_estimate_and_below_it_exactly(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    n = EXACT_TO + 400  # every other one in project p0
    await pool.execute(
        "insert into submissions (team_id, user_id, project, title, priority)"
        " select $1, $2, 'p' || (i % 2), 'Render shot ' || i, i % 50 from generate_series(1, $3) i",
        team.id,
        team.user_id,
        n,
    )
    deadline = asyncio.get_running_loop().time() + 300
    while await pool.fetchval("select count(*) from submission_rows where team_id = $1", team.id) < n:
        assert asyncio.get_running_loop().time() < deadline, f"the relay did not save {n:,} rows within 300 s"
        await asyncio.sleep(0.5)
    await pool.execute("analyze submission_rows")
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await range_text(page, "1–100 of about 100,000")  # PostgreSQL's estimate of 100,400, to two figures
    assert await page.is_disabled(".pager [data-go='last']")  # its page is not known
    assert not await page.is_disabled(".pager [data-go='next']")
    await page.select_option("select[data-filter='project']", "p0")
    await range_text(page, f"1–100 of {n // 2:,}")  # counted: exact
    assert not await page.is_disabled(".pager [data-go='last']")


async def test_rows_that_enter_a_window_read_again_show_their_own_words_and_the_window_catches_up(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, many: list[int]
) -> None:
    """Sorted by progress while tasks stream, each read of the window brings rows in and out; the rows that came
    are drawn a few a frame. In every frame, each row shows its own submission (its JOB ID is the row's), and once
    the changes stop the page shows exactly the window the server gives."""
    await page.goto(f"{stack.nodes[0].http}/submissions?sort=progress&dir=desc")
    await page.wait_for_function(f"({SHOWN})().length === 100")
    await page.mouse.move(5, 5)  # away from the table: the window is read again as the order changes
    await page.evaluate("""() => {
      window.__wrong = []; window.__orders = new Set();
      const look = () => {
        const rows = [...document.querySelectorAll('tbody tr[data-sub]')];
        for (const tr of rows) {
          const id = tr.querySelector("td[data-col='id']")?.textContent;
          if (id !== tr.dataset.sub) window.__wrong.push([tr.dataset.sub, id]);
        }
        window.__orders.add(rows.map((tr) => tr.dataset.sub).join());
        if (!window.__stop) requestAnimationFrame(look);
      };
      requestAnimationFrame(look);
    }""")
    async with streaming(pool, team, many[:300]):
        await page.wait_for_function("window.__orders.size > 5", timeout=30_000)
    window = f"""async () => {{
      const answer = await fetch("/api/teams/{team.id}/submissions?sort=progress&dir=desc&offset=0&limit=100");
      return (await answer.json()).rows.map((r) => String(r.id));
    }}"""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        shown = [str(i) for i in await page.evaluate(SHOWN)]
        if shown == await page.evaluate(window) or asyncio.get_running_loop().time() > deadline:
            break
        await page.wait_for_timeout(250)
    assert shown == await page.evaluate(window)
    assert await page.evaluate("window.__stop = true, window.__wrong") == []
