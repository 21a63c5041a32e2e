"""A calm screen, in real Chromium: nothing moves under a resting pointer while about 1,000 changes a second,
toasts and the "N new, show" pill arrive (their room is kept for them), one toast of each kind at a time, each
at its own place, and the outcome of the person's own action stays until they dismiss it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from tests.browser.test_finishes import trajectory
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs
from tests.integration.test_submission_windows import add_submissions, saved

# Toasts arrive as the app raises them (the same module the page runs).
TOASTS = """async () => {
  const { toast } = await import('/js/ui.js');
  toast('Retried 3 jobs', 'success');
  toast('Jobs completed successfully', 'success', { detail: 'Copper grain run 12', kind: 'finish' });
  toast('Killed 2 jobs', 'success');
}"""


async def churn(pool: asyncpg.Pool, ids: list[int], stop: asyncio.Event) -> None:
    """About 1,000 job changes a second (100 every tenth of a second) until `stop`."""
    step = 0
    while not stop.is_set():
        chunk = ids[(step * 100) % len(ids) :][:100]
        await pool.execute(
            "update jobs set status = $2 where id = any($1::bigint[])", chunk, ("running", "completed")[step % 2]
        )
        step += 1
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def streaming(pool: asyncpg.Pool, ids: list[int]) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(churn(pool, ids, stop))
    try:
        yield
    finally:
        stop.set()
        await task


async def rest_on(page: Any, selector: str, toasts: bool = True) -> None:
    """Rest the pointer on `selector`; toasts arrive and go; the element under it never changes."""
    box = await page.locator(selector).first.bounding_box()
    x, y = box["x"] + min(40, box["width"] / 2), box["y"] + box["height"] / 2
    await page.mouse.move(x, y)
    await page.evaluate(f"() => {{ window.__under = document.elementFromPoint({x}, {y}); }}")
    if toasts:
        await page.evaluate(TOASTS)
    for i in range(15):  # a second and a half of changes with the pointer still
        await page.wait_for_timeout(100)
        if toasts and i == 7:
            await page.evaluate("() => { for (const t of document.querySelectorAll('#toasts .toast')) t.remove(); }")
        moved = await page.evaluate(f"() => document.elementFromPoint({x}, {y}) !== window.__under")
        assert not moved, f"what lies under the pointer on {selector} changed"


async def settled(page: Any, expression: str, within: float = 30.0, reads: int = 4) -> Any:
    """What `expression` reads once `reads` reads 0.3 s apart agree: a layout drawn, not one still arriving."""
    last, same = await page.evaluate(expression), 1
    deadline = asyncio.get_running_loop().time() + within
    while same < reads:
        await asyncio.sleep(0.3)
        now = await page.evaluate(expression)
        same = same + 1 if now == last else 1
        assert asyncio.get_running_loop().time() < deadline, f"{expression} still changing after {within:g} s"
        last = now
    return last


async def test_nothing_moves_under_a_resting_pointer(page: Any, stack: Stack, pool: asyncpg.Pool, team: Team) -> None:
    await page.set_viewport_size({"width": 1400, "height": 800})
    ids = await insert_jobs(pool, team, 400)
    for n in range(30):  # enough trajectories that the popover's list fills it, its footer at the bottom
        t = await pool.fetchval(
            "insert into trajectories (team_id, name) values ($1, $2) returning id", team.id, f"Run {n:02}"
        )
        await insert_jobs(pool, team, 2, trajectory_id=t)
    await page.wait_for_selector(f"[data-card='{team.trajectory_id}']")
    async with streaming(pool, ids):
        await rest_on(page, f"[data-card='{team.trajectory_id}']")  # a dashboard card
        await page.click("#ring")
        await page.wait_for_selector("#popover .traj")
        await rest_on(page, "#popover .traj > .head")  # a row of the popover's list
        await rest_on(page, "#popover .open-clusters")  # and its footer
        await page.evaluate(TOASTS)  # toasts never cover the popover's controls
        footer = await page.locator("#popover .open-clusters").bounding_box()
        strip = await page.locator("#toasts").bounding_box()
        assert footer["y"] + footer["height"] <= strip["y"]
        await page.keyboard.press("Escape")
        await page.click(f"[data-menu='{team.trajectory_id}']")
        await page.click(".menu li:text-is('Compute jobs')")
        await page.wait_for_selector("#panel .row")
        await rest_on(page, "#panel .row")  # the trajectory's panel


async def test_the_submissions_table_stays_put_as_news_is_announced(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    await page.set_viewport_size({"width": 1400, "height": 800})
    subs = await add_submissions(pool, team, 150)
    await saved(stack, team, 150)
    ids = [
        r["id"]
        for r in await pool.fetch(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, submission_id)"
            " select $1, $2, $3, 'analysis', 'Analysis frame', f, s from unnest($4::bigint[]) s,"
            " generate_series(0, 3) f returning id",
            team.id,
            team.trajectory_id,
            team.cluster_id,
            subs,
        )
    ]
    await page.goto(f"{stack.nodes[0].http}/submissions?sort=progress&dir=desc")
    await page.wait_for_function("document.querySelectorAll('tbody tr[data-sub]').length === 100")
    async with streaming(pool, ids):
        await rest_on(page, "tbody tr[data-sub]:nth-child(6)")
        await page.wait_for_selector(".news:not([hidden])")  # what moved is announced, in the room kept for it
        await rest_on(page, "tbody tr[data-sub]:nth-child(6)", toasts=False)
        await rest_on(page, ".pager [data-go='next']")  # the pager, as toasts come and go


async def test_one_toast_of_each_kind_each_in_its_place(page: Any) -> None:
    await page.evaluate("""async () => {
      const { toast } = await import('/js/ui.js');
      toast('Retried 3 jobs', 'success');
      toast('Jobs completed successfully', 'success', { detail: 'Copper grain run 12', kind: 'finish' });
    }""")
    close = await page.locator("#toasts .toast[data-kind='outcome'] .toast-close").bounding_box()
    await page.evaluate("""async () => {
      const { toast } = await import('/js/ui.js');
      toast('Killed 2 jobs', 'success');
      toast('Analysis completed successfully!', 'success', { detail: 'Lipid bilayer 310K', kind: 'finish' });
    }""")
    texts = await page.eval_on_selector_all("#toasts .toast .words", "els => els.map(e => e.textContent)")
    assert sorted(texts) == ["Analysis completed successfully! Lipid bilayer 310K", "Killed 2 jobs"]
    assert await page.locator("#toasts .toast[data-kind='outcome'] .toast-close").bounding_box() == close
    # The finish goes with its time; the outcome of the person's own action stays until they dismiss it.
    await page.wait_for_selector("#toasts .toast[data-kind='finish']", state="detached", timeout=20000)
    assert await page.locator("#toasts .toast", has_text="Killed 2 jobs").count() == 1
    await page.click("#toasts .toast[data-kind='outcome'] .toast-close")
    assert await page.locator("#toasts .toast").count() == 0


async def test_at_360_px_the_popover_keeps_its_list_the_frames_their_times_and_the_panel_its_plain_title(
    page: Any, pool: asyncpg.Pool, team: Team
) -> None:
    await page.set_viewport_size({"width": 360, "height": 640})
    for i in range(5):  # trajectories at work, each with frames at their times
        t = await trajectory(pool, team, f"Narrow run {i}")
        await pool.execute(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, timestep) select $1, $2, $3,"
            " 'preprocess', 'Preprocess trajectory frame', f, f * 0.5 from generate_series(0, 11) f",
            team.id,
            t,
            team.cluster_id,
        )
    await page.wait_for_function("document.querySelectorAll('.cards [data-card]').length >= 5")
    await page.click("#ring")
    await page.wait_for_selector("#popover:not([hidden]) [data-head]")
    list_box = "() => { const r = document.querySelector('#popover .pop-list').getBoundingClientRect(); return [r.top, r.height]; }"
    footer = "() => document.querySelector('#popover .block').getBoundingClientRect().top"
    # Measured once the popover is drawn whole: on a busy machine its rows, the online count under the list and a
    # "new" button beside its title may each arrive a moment later and take a line from the list.
    await page.wait_for_function(
        "document.querySelectorAll('#popover .traj').length >= 5 && !document.querySelector('#popover .online').hidden"
        " && document.querySelector('#popover .news').hidden"
    )
    both = f"() => [({list_box})(), ({footer})()]"
    before, clusters = await settled(page, both)
    assert before[1] >= 200, before  # three trajectories and more, under the counts and the search
    await page.evaluate(TOASTS)
    await page.wait_for_selector("#toasts .toast")
    assert await page.evaluate(list_box) == before  # the toasts take their own strip: the list keeps its height
    assert await page.evaluate(footer) == clusters  # and Open clusters stays put
    # A long toast reads whole in its strip, on two lines, not cut to "4 successfull…".
    long = "5 trajectories finished: 4 successfully, 1 with errors"
    await page.evaluate(f"import('/js/ui.js').then((m) => m.toast({long!r}, 'warning', {{ kind: 'finish' }}))")
    await page.wait_for_selector(f"#toasts .toast:has-text({long!r})")
    shown = await page.evaluate(
        "() => { const w = [...document.querySelectorAll('#toasts .toast .words')].pop();"
        " const t = document.querySelector('#toasts').getBoundingClientRect(), r = w.getBoundingClientRect();"
        " return [w.scrollHeight <= w.clientHeight, w.scrollWidth <= w.clientWidth, r.bottom <= t.bottom]; }"
    )
    assert shown == [True, True, True], shown
    assert await page.evaluate(list_box) == before and await page.evaluate(footer) == clusters
    await page.keyboard.press("Escape")

    # A trajectory's panel, opened by keyboard: its title is focused with no field's box around it, and every
    # frame's time shows whole ("0.5 ps", the "t =" heard only).
    card = await page.evaluate(
        "[...document.querySelectorAll('[data-card]')].find((c) => c.textContent.includes('Narrow run')).dataset.card"
    )
    await page.locator(f"[data-card='{card}']").focus()
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#panel [data-group] .ts:not([hidden])")
    assert await page.evaluate("document.activeElement.id") == "panel-title"
    assert await page.evaluate("getComputedStyle(document.activeElement).outlineStyle") == "none"
    cut = await page.evaluate(
        """() => [...document.querySelectorAll('#panel [data-group] .ts:not([hidden])')]
            .filter((ts) => ts.scrollWidth > ts.clientWidth + 1).map((ts) => ts.textContent)"""
    )
    assert cut == []
    lead, value = await page.evaluate(
        """() => { const ts = document.querySelector('#panel [data-group] .ts:not([hidden])');
            return [ts.querySelector('.ts-lead').getBoundingClientRect().width, ts.querySelector('.ts-value').textContent]; }"""
    )
    assert lead <= 1 and value == "0 ps", (lead, value)
