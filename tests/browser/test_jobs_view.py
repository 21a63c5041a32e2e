"""The Jobs view a person can trust, in real Chromium: every status shown, nothing moving under the pointer,
layout that holds from 360 px, toasts that tell the truth, the analysis listing, keyboard and accessibility."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from gateway.core.status import STATUSES, group_status
from gateway.sim.cluster import SimCluster
from tests.browser.helpers import ROOT, axe_violations, layout_problems, open_groups, sign_in, unfold
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs
from tests.integration.test_actions import add_cluster

VECTORS = json.loads((ROOT / "frontend" / "vectors" / "jobs-view.json").read_text())
SHOWN = {c["status"]: c for c in VECTORS["statuses"]}
JOB_STATUSES = [c["status"] for c in VECTORS["statuses"] if c["status"] in STATUSES]  # stored ones (not silent)


async def new_trajectories(pool: asyncpg.Pool, team: Team, names: list[str]) -> list[int]:
    return [
        await pool.fetchval("insert into trajectories (team_id, name) values ($1, $2) returning id", team.id, n)
        for n in names
    ]


async def open_panel(page: Any, trajectory_id: int, item: str = "Compute jobs") -> None:
    await unfold(page, trajectory_id)
    await page.click(f"[data-menu='{trajectory_id}']")
    await page.click(f".menu li:text-is('{item}')")
    await page.wait_for_selector("#panel:not([hidden])")


@pytest.fixture
async def clusters(stack: Stack, pool: asyncpg.Pool, team: Team) -> AsyncIterator[tuple[SimCluster, SimCluster]]:
    """gpu-1, which confirms, and gpu-2, which acts but never confirms; neither runs anything by itself."""
    gpu1 = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    gpu2 = SimCluster(
        stack.nodes[0].http,
        await add_cluster(pool, team, "gpu-2"),
        workers=0,
        report_metrics=False,
        confirm=False,
    )
    for c in (gpu1, gpu2):
        await c.start()
    yield gpu1, gpu2
    for c in (gpu1, gpu2):
        await c.stop()


async def reported(cluster: SimCluster, ids: list[int], status: str) -> None:
    for job_id in ids:
        cluster.jobs[job_id].status = status
        cluster._report(cluster.jobs[job_id], error="boom" if status == "failed" else None)
    await cluster.flushed()
    await cluster.flushed()


# -- every status has its word and colour


async def test_every_status_shows_its_word_and_colour(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, status)"
        " select $1, $2, $3, 'preprocess', 'Preprocess trajectory frame', (f - 1)::int, s"
        " from unnest($4::text[]) with ordinality as t(s, f)",
        team.id,
        team.trajectory_id,
        team.cluster_id,
        JOB_STATUSES,
    )
    await open_panel(page, team.trajectory_id)
    await open_groups(page, "#panel", len(JOB_STATUSES))
    await page.wait_for_function(f"document.querySelectorAll('#panel .row.job').length === {len(JOB_STATUSES)}")
    for frame, status in enumerate(JOB_STATUSES):
        group = page.locator(f"#panel [data-group='frame:{frame}']")
        shown = SHOWN[group_status({status: 1})]
        assert (await group.locator(".status").inner_text(), shown["colour"] in await group.get_attribute("class")) == (
            shown["word"],
            True,
        )
        job = page.locator(f"#panel [data-group='frame:{frame}'] + .row.job")
        assert await job.locator(".status").inner_text() == SHOWN[status]["word"], status
        assert SHOWN[status]["colour"] in (await job.get_attribute("class")).split(), status
    # One job walks through every status; its row, its group and the popover follow, word and colour.
    walker = await pool.fetchval("select id from jobs where trajectory_id = $1 and frame = 0", team.trajectory_id)
    await pool.execute(
        "delete from jobs where trajectory_id = $1 and frame > 0", team.trajectory_id
    )  # only the walker left
    await page.click("#ring")
    for status in [*JOB_STATUSES, *reversed(JOB_STATUSES)]:
        await pool.execute("update jobs set status = $2 where id = $1", walker, status)
        word, colour = SHOWN[status]["word"], SHOWN[status]["colour"]
        await page.wait_for_function(
            """([id, word, colour]) => {
                const row = document.querySelector(`#panel [data-job='${id}']`);
                return row && row.querySelector('.status').textContent === word && row.classList.contains(colour);
            }""",
            arg=[walker, word, colour],
        )
        group = SHOWN[group_status({status: 1})]
        head = page.locator(f"#popover [data-head='{team.trajectory_id}']")
        await page.wait_for_function(
            """([id, word, colour]) => {
                const head = document.querySelector(`#popover [data-head='${id}']`);
                return head && head.querySelector('.state').textContent === word && head.classList.contains(colour);
            }""",
            arg=[team.trajectory_id, group["word"], group["colour"]],
        )
        assert "undefined" not in await head.inner_text()
    assert "undefined" not in await page.inner_text("body")


async def test_a_silent_clusters_jobs_say_since_when_and_come_back_when_it_reports(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """The cluster was last heard from two hours ago: the relay's sweep lists its unfinished jobs as silent; the
    ring stops calling them running, the popover counts them apart, each row says since when. Its next report
    (metrics here) brings them back."""
    ids = await insert_jobs(pool, team, 3)
    await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids[:2])
    await page.wait_for_function("document.getElementById('ring-label').textContent === '2 running'")
    heard = await pool.fetchval(
        "update clusters set heard_at = now() - interval '2 hours' where id = $1 returning heard_at", team.cluster_id
    )
    await page.wait_for_function("document.getElementById('ring-label').textContent === '3 silent'", timeout=60_000)
    await page.click("#ring")
    silent = page.locator("#popover .silent-count")
    await silent.wait_for()
    assert (await silent.inner_text()).split() == ["3", "Cluster", "silent"]
    assert await page.locator("#popover [data-bucket='running']").inner_text() == "0"
    head = page.locator(f"#popover [data-head='{team.trajectory_id}']")
    assert await head.locator(".state").inner_text() == SHOWN["silent"]["word"]
    assert SHOWN["silent"]["colour"] in (await head.get_attribute("class")).split()
    await page.keyboard.press("Escape")
    await open_panel(page, team.trajectory_id)
    await open_groups(page, "#panel", 3)
    # On the one clock of every page, 24-hour, never "03:30 AM" beside "20:16:04".
    since = await page.evaluate(
        "(at) => new Date(at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', hourCycle: 'h23' })",
        heard.isoformat(),
    )
    assert re.fullmatch(r"\d\d:\d\d", since), since
    await page.wait_for_function("document.querySelectorAll('#panel .row.job.grey').length === 3")
    words = await page.locator("#panel .row.job .status").all_inner_texts()
    assert words == [f"cluster silent since {since}"] * 3
    # The cluster reports again: its jobs show their own statuses.
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        response = await client.post(
            "/api/ingest/metrics",
            json={"cpu": 10, "memory": 20, "disk": 30, "network": 1},
            headers={"Authorization": f"Bearer {team.cluster_key}"},
        )
    assert response.status_code == 204, response.text
    await page.wait_for_function("document.getElementById('ring-label').textContent === '2 running'")
    await page.wait_for_function("document.querySelectorAll('#panel .row.job.grey').length === 0")
    assert sorted(await page.locator("#panel .row.job .status").all_inner_texts()) == ["queued", "running", "running"]
    assert await silent.is_hidden()


# -- nothing moves under the pointer


async def test_a_click_lands_where_it_aimed_while_the_list_changes(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    ids = [team.trajectory_id, *await new_trajectories(pool, team, [f"Aim {i}" for i in range(11)])]
    job_of = {t: (await insert_jobs(pool, team, 1, trajectory_id=t))[0] for t in ids}
    await page.click("#ring")
    await page.wait_for_function(f"document.querySelectorAll('#popover [data-head]').length === {len(ids)}")
    stop = asyncio.Event()

    async def churn() -> None:  # some trajectory's job changes every tenth of a second: it becomes the most recent
        i = 0
        while not stop.is_set():
            await pool.execute(
                "update jobs set status = $2 where id = $1",
                job_of[ids[(i * 5) % len(ids)]],
                ("running", "queued")[i % 2],
            )
            i += 1
            await asyncio.sleep(0.1)

    churning = asyncio.create_task(churn())
    moved = 0
    try:
        newest = None
        for attempt in range(6):
            target = page.locator("#popover [data-head]").nth(2 + attempt % 4)
            aimed = await target.get_attribute("data-head")
            box = await target.bounding_box()
            x, y = box["x"] + 40, box["y"] + box["height"] / 2
            await page.mouse.move(x, y)
            if attempt == 2:  # a trajectory created meanwhile is announced, not slipped in under the pointer
                (newest,) = await new_trajectories(pool, team, ["Aim newest"])
                await insert_jobs(pool, team, 1, trajectory_id=newest)
                await page.wait_for_selector("#popover .pop-bar .news:text('1 new, show')")
            draws = await page.evaluate("window.gatewayStats.draws")
            await page.wait_for_function(
                f"window.gatewayStats.draws >= {draws + 4}"
            )  # changes kept coming while it aimed
            moved += await page.evaluate("""() => {
                const shown = [...document.querySelectorAll('#popover [data-head]')].map(e => Number(e.dataset.head));
                const latest = gatewayApp.team.recent().map(s => s.id).filter(id => shown.includes(id));
                return JSON.stringify(shown) !== JSON.stringify(latest) ? 1 : 0;
            }""")
            await page.mouse.click(x, y)
            await page.wait_for_selector(
                f"#popover [data-head='{aimed}'][aria-expanded='true']"
            )  # what it aimed at, every time
            await page.mouse.click(x, y)
            await page.wait_for_selector(f"#popover [data-head='{aimed}'][aria-expanded='false']")
        assert moved > 0  # the order did change underneath: holding it was needed
        stop.set()
        await churning
        await page.mouse.move(5, 400)  # the pointer leaves: the order catches up, most recent first, new one included
        await page.wait_for_function("""() => {
            const shown = [...document.querySelectorAll('#popover [data-head]')].map(e => Number(e.dataset.head));
            return JSON.stringify(shown) === JSON.stringify(gatewayApp.team.recent().map(s => s.id));
        }""")
        assert await page.locator("#popover .pop-bar .news").is_hidden()
        assert await page.locator(f"#popover [data-head='{newest}']").count() == 1
    finally:
        stop.set()
        await churning


async def test_cards_keep_their_places_under_the_pointer_and_new_ones_come_first(
    page: Any, pool: asyncpg.Pool, team: Team
) -> None:
    ids = [team.trajectory_id, *await new_trajectories(pool, team, [f"Card {i}" for i in range(5)])]
    await page.reload()
    await page.wait_for_function(f"document.querySelectorAll('[data-card]').length === {len(ids)}")
    order = await page.eval_on_selector_all("[data-card]", "els => els.map(e => Number(e.dataset.card))")
    assert order == sorted(ids, reverse=True)  # newest first
    button = page.locator(f"[data-menu='{ids[2]}']")
    box = await button.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    await page.mouse.move(x, y)
    (fresh,) = await new_trajectories(pool, team, ["Card newest"])
    await insert_jobs(pool, team, 1, trajectory_id=fresh)
    await page.wait_for_selector(".cards-bar .news:text('1 new, show')")
    await page.mouse.click(x, y)
    assert await page.get_attribute(".menu", "aria-label") == "Menu of Card 1"  # the card it aimed at
    await page.keyboard.press("Escape")  # focus is back on its menu button: a keyboard user's place holds the grid too
    await page.mouse.click(600, 760)  # the pointer leaves the grid, and focus with it
    await page.wait_for_function(
        f"document.querySelector('[data-card]').dataset.card === '{fresh}'"
    )  # newest first, once free
    assert await page.locator(".cards-bar .news").is_hidden()


# -- layout that holds, from 360 px


async def layout_data(stack: Stack, pool: asyncpg.Pool, team: Team) -> SimCluster:
    long = "Lipid bilayer with cholesterol, 310 K, NPT ensemble, replica 7 of 12, restarted from checkpoint"
    await pool.execute("update trajectories set name = $2 where id = $1", team.trajectory_id, long)
    others = await new_trajectories(pool, team, [f"Trajectory {i} of a long afternoon of uploads" for i in range(18)])
    for t in others:
        await insert_jobs(pool, team, 2, trajectory_id=t)
    cluster = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await cluster.start()
    analysis = await cluster.create_analysis(team.trajectory_id, "Polyhedral Template Matching")
    sid = await cluster.create_submission(
        title=long, project="membranes", trajectory_id=team.trajectory_id, user_id=team.user_id
    )
    ids = await cluster.submit(
        [
            {
                "trajectory_id": team.trajectory_id,
                "kind": "analysis",
                "name": "Polyhedral Template Matching",
                "analysis_id": analysis,
                "frame": f,
                "timestep": f * 0.5,
                "submission_id": sid,
            }
            for f in range(3)
        ]
    )
    cluster.jobs[ids[0]].status = "failed"
    cluster._report(
        cluster.jobs[ids[0]], error="plugin raised ValueError: cutoff radius must be positive, and it was -1.5 Å here"
    )
    await cluster.flushed()
    await cluster.flushed()
    return cluster


@pytest.mark.parametrize("width", [360, 768, 1400])
async def test_nothing_overlaps_or_runs_off_screen(
    browser: Any, stack: Stack, pool: asyncpg.Pool, team: Team, width: int
) -> None:
    cluster = await layout_data(stack, pool, team)
    context = await browser.new_context(viewport={"width": width, "height": 760}, bypass_csp=True)
    try:
        page = await context.new_page()
        base = stack.nodes[0].http
        await sign_in(page, base, team.token)
        await page.wait_for_function("document.querySelectorAll('[data-card]').length === 19")
        problems = {"dashboard": await layout_problems(page, "header, #main, #toasts")}
        title = page.locator(f"[data-card='{team.trajectory_id}'] .card-title")
        assert (await title.get_attribute("title")).startswith("Lipid bilayer with cholesterol")
        assert await title.locator(".title-text").evaluate(
            "e => e.scrollHeight > e.clientHeight && e.getClientRects().length && e.clientHeight < 3 * parseFloat(getComputedStyle(e).lineHeight)"
        )  # cut short after two lines, with an ellipsis
        await page.click("#ring")
        await page.click(f"[data-head='{team.trajectory_id}']")
        await page.click("#popover [data-group='frame:0']")
        await page.wait_for_selector("#popover .row.job")
        problems["popover"] = await layout_problems(page, "header, #popover")
        # The counts and the Clusters block stay in view; the list between them scrolls.
        assert await page.evaluate("""() => {
            const pop = document.getElementById('popover').getBoundingClientRect();
            const inside = (sel) => { const r = document.querySelector(sel).getBoundingClientRect();
                return r.top >= pop.top && r.bottom <= pop.bottom && r.bottom <= innerHeight && r.height > 0; };
            const list = document.querySelector('.pop-list');
            return inside('.counts') && inside('.block') && list.scrollHeight > list.clientHeight;
        }""")
        await page.keyboard.press("Escape")
        await page.click(f"[data-menu='{team.trajectory_id}']")
        problems["card menu"] = await layout_problems(page, ".menu")
        await page.click(".menu li:text-is('Compute jobs')")
        await open_groups(page, "#panel", 1)
        problems["panel"] = await layout_problems(page, "header, #panel, #toasts")
        await page.click("#tab-analyses")
        await page.wait_for_selector("#panel tr[data-analysis]")
        problems["analyses"] = await layout_problems(page, "header, #panel, #toasts")
        await page.click("#panel-close")
        await page.goto(f"{base}/submissions")
        await page.wait_for_selector("tr[data-sub]")
        problems["submissions"] = await layout_problems(page, "header, #main, #toasts")
        await page.click("tr[data-sub]", button="right")
        problems["submission menu"] = await layout_problems(page, ".menu")
        await page.keyboard.press("Escape")
        for where in ("team", "clusters", "account"):
            await page.goto(f"{base}/#/{where}")
            await page.wait_for_selector("main h1")
            await page.wait_for_function(
                "!document.querySelector('main .who') || !!document.querySelector('tr[data-session]')"
            )
            problems[where] = await layout_problems(page, "header, #main")
        assert {k: v for k, v in problems.items() if v} == {}
    finally:
        await context.close()
        await cluster.stop()


LONG_ERROR = (
    "plugin raised ValueError: cutoff radius must be positive, and it was -1.5 Å here; the frame's header says "
    "12.0 Å and the run's settings file says -1.5 Å, so the settings win (see the plugin's docs, section 4.2, on "
    "which one counts), then the worker exited with code 1 after writing 0 of 48,216 atoms: END OF THE ERROR"
)


@pytest.mark.parametrize("width", [360, 1400])
async def test_a_long_error_is_read_whole_by_a_tap_a_click_or_the_keyboard(
    browser: Any, stack: Stack, pool: asyncpg.Pool, team: Team, width: int
) -> None:
    cluster = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await cluster.start()
    ids = await cluster.submit([{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "p", "frame": 0}])
    cluster.jobs[ids[0]].status = "failed"
    cluster._report(cluster.jobs[ids[0]], error=LONG_ERROR)
    await cluster.flushed()
    await cluster.flushed()
    touch = width == 360
    context = await browser.new_context(
        viewport={"width": width, "height": 760}, bypass_csp=True, has_touch=touch, is_mobile=touch
    )
    try:
        page = await context.new_page()
        await sign_in(page, stack.nodes[0].http, team.token)
        await open_panel(page, team.trajectory_id)
        await open_groups(page, "#panel", 1)
        error = page.locator(f"#panel [data-job='{ids[0]}'] .error")
        await error.wait_for()
        # The row cuts it short...
        assert await error.evaluate("e => e.scrollWidth > e.clientWidth")
        whole = page.locator("#panel .error-whole")
        # ... a tap (a click at 1400 px) shows it whole: every word in view, nothing cut or scrolled away.
        await (error.tap() if touch else error.click())
        await whole.wait_for()
        assert await whole.inner_text() == LONG_ERROR
        assert await whole.evaluate("""e => { const r = e.getBoundingClientRect();
            return r.left >= 0 && r.right <= innerWidth && e.scrollWidth <= e.clientWidth
                && e.scrollHeight <= e.clientHeight; }""")
        await whole.scroll_into_view_if_needed()
        assert await whole.evaluate(
            "e => { const r = e.getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; }"
        )
        # The same again closes it; by keyboard, Enter on the focused row opens it and Escape closes it.
        await (error.tap() if touch else error.click())
        await whole.wait_for(state="hidden")
        await page.locator(f"#panel [data-job='{ids[0]}']").focus()
        await page.keyboard.press("Enter")
        await whole.wait_for()
        await page.screenshot(path=f"/tmp/retry-error-{width}.png")
        assert await page.locator(f"#panel [data-job='{ids[0]}']").get_attribute("aria-describedby") == (
            await whole.get_attribute("id")
        )
        await page.keyboard.press("Escape")
        await whole.wait_for(state="hidden")
        assert not await page.locator("#panel").is_hidden()  # Escape closed the error, not the panel
    finally:
        await context.close()
        await cluster.stop()


# -- accessibility, audited by axe-core


async def test_axe_finds_no_serious_violation_on_any_view(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    cluster = await layout_data(stack, pool, team)
    try:
        found: dict[str, list[dict[str, Any]]] = {}
        await page.reload()
        await page.wait_for_selector("[data-card]")
        found["dashboard"] = await axe_violations(page)
        await page.click("#ring")
        await page.click(f"[data-head='{team.trajectory_id}']")
        await page.click("#popover [data-group='frame:0']")
        await page.wait_for_selector("#popover .row.job")
        found["popover"] = await axe_violations(page)
        await page.keyboard.press("Escape")
        await open_panel(page, team.trajectory_id)
        await open_groups(page, "#panel", 1)
        found["panel"] = await axe_violations(page)
        await page.click("#tab-analyses")
        await page.wait_for_selector("#panel tr[data-analysis]")
        found["analysis listing"] = await axe_violations(page)
        await page.click("#panel-close")
        base = stack.nodes[0].http
        await page.goto(f"{base}/submissions")
        await page.wait_for_selector("tr[data-sub]")
        await page.click("tr[data-sub]", button="right")
        found["submissions with its menu"] = await axe_violations(page)
        await page.click(".menu li:text-is('Edit / Priority')")
        found["a dialog"] = await axe_violations(page)
        await page.keyboard.press("Escape")
        for where in ("team", "clusters", "account"):
            await page.goto(f"{base}/#/{where}")
            await page.wait_for_selector("main h1")
            await page.wait_for_function(
                "!document.querySelector('main .who') || !!document.querySelector('tr[data-session]')"
            )
            found[where] = await axe_violations(page)
        assert {k: v for k, v in found.items() if v} == {}
    finally:
        await cluster.stop()


# -- the document's behaviour: actions on every group, by mouse and keyboard, focus back where it was


async def test_the_trajectory_actions_are_on_every_group_by_mouse_and_keyboard(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    ids = await gpu1.submit(
        [
            {
                "trajectory_id": team.trajectory_id,
                "kind": "preprocess",
                "name": "Preprocess trajectory frame",
                "frame": f,
            }
            for f in range(2)
        ]
        + [{"trajectory_id": team.trajectory_id, "kind": "storage_transfer", "name": "Storage Transfer"}]
    )
    await reported(gpu1, ids[:1], "failed")
    await reported(gpu1, ids[1:2], "preempted")
    await open_panel(page, team.trajectory_id)
    # A visible menu button on each group...
    await page.wait_for_selector("#panel [data-group='transfers'] .menu-button")
    await page.click("#panel [data-group='frame:1'] .menu-button")
    assert await page.eval_on_selector_all(".menu li", "els => els.map(e => e.textContent)") == [
        "Remove Running Jobs",
        "Retry Failed Jobs",
    ]
    await page.keyboard.press("Escape")
    # ...right-click on any group...
    await page.click("#panel [data-group='transfers']", button="right")
    await page.wait_for_selector(".menu li:text-is('Retry Failed Jobs')")
    await page.keyboard.press("Escape")
    # ...and the context-menu key on a focused group, with focus back on it afterwards.
    await page.focus("#panel [data-group='frame:0']")
    await page.keyboard.press("Shift+F10")
    await page.wait_for_selector(".menu li:focus")
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("Enter")
    await page.locator(".toast.success", has_text="Queued 2 failed job(s) for retry (1 of them preempted)").wait_for()
    assert await page.evaluate("document.activeElement.dataset.group") == "frame:0"
    rows = await pool.fetch("select status from jobs where id = any($1::bigint[])", ids[:2])
    assert {r["status"] for r in rows} == {"retrying"}  # preempted ones are retried from the Jobs view too
    # The same in the popover, on the trajectory's row and on its groups.
    await page.click("#panel-close")
    await page.click("#ring")
    await page.click(f"#popover [data-head='{team.trajectory_id}'] .menu-button")
    await page.wait_for_selector(".menu li:text-is('Remove Running Jobs')")
    await page.keyboard.press("Escape")
    await page.click(f"#popover [data-head='{team.trajectory_id}']")
    await page.click("#popover [data-group='frame:1']", button="right")
    await page.click(".menu li:text-is('Retry Failed Jobs')")
    await page.locator(
        ".toast.info", has_text="No failed jobs found to retry"
    ).wait_for()  # nothing happened: no success


async def test_everything_works_by_keyboard_alone(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    rdf = await gpu1.create_analysis(team.trajectory_id, "Radial Distribution Function")
    ids = await gpu1.submit(
        [
            {
                "trajectory_id": team.trajectory_id,
                "kind": "analysis",
                "name": "Radial Distribution Function",
                "analysis_id": rdf,
                "frame": 0,
            }
        ]
    )
    await reported(gpu1, ids, "failed")
    await page.wait_for_function("document.getElementById('ring-label').textContent === 'Jobs'")
    # The popover: open, menu, back; expand, into the tree, a job's own menu.
    await page.focus("#ring")
    await page.keyboard.press("Enter")
    await page.wait_for_function(f"document.activeElement.dataset.head === '{team.trajectory_id}'")
    await page.keyboard.press("ContextMenu")
    await page.wait_for_selector(".menu li:focus")
    await page.keyboard.press("Escape")
    await page.wait_for_function(f"document.activeElement.dataset.head === '{team.trajectory_id}'")  # focus came back
    assert await page.locator("#popover").is_visible()
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#popover [data-group='frame:0']")
    await page.keyboard.press("Tab")  # into the trajectory's tree: its first group
    await page.wait_for_function("document.activeElement.dataset.group === 'frame:0'")
    await page.keyboard.press("ArrowRight")  # opens it
    await page.keyboard.press("ArrowDown")
    await page.wait_for_function(f"document.activeElement.dataset.job === '{ids[0]}'")
    await page.keyboard.press("Shift+F10")
    await page.wait_for_selector(".menu li:focus:text-is('Retry Failed Frames of Radial Distribution Function')")
    await page.keyboard.press("Enter")
    await page.locator(".toast", has_text="Queued 1 failed job(s) for retry").wait_for()
    await page.wait_for_function(f"document.activeElement.dataset.job === '{ids[0]}'")
    await page.keyboard.press("Escape")
    await page.wait_for_selector("#popover", state="hidden")
    assert await page.evaluate("document.activeElement.id") == "ring"
    # The panel, from a card's menu (the retried work is in hand again: its card leads the dashboard); Escape
    # closes it and focus goes back to the menu button.
    await page.locator(f"[data-menu='{team.trajectory_id}']").wait_for(state="visible")
    await page.focus(f"[data-menu='{team.trajectory_id}']")
    await page.keyboard.press("Enter")
    await page.wait_for_selector(".menu li:focus:text-is('Compute jobs')")
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("Enter")  # Analyses
    await page.wait_for_selector("#tab-analyses[aria-selected='true']")
    await page.wait_for_selector(f"#panel tr[data-analysis='{rdf}']")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")
    await page.keyboard.press("Tab")  # the title, then its menu button, then Close, then the selected tab
    assert await page.evaluate("document.activeElement.id") == "tab-analyses"
    await page.keyboard.press("ArrowLeft")
    await page.wait_for_selector("#tab-jobs[aria-selected='true']")
    await page.keyboard.press("Escape")
    await page.wait_for_selector("#panel", state="hidden")
    assert await page.evaluate("document.activeElement.dataset.menu") == str(team.trajectory_id)


# -- the analysis listing, and same-named jobs told apart


async def test_the_analysis_listing_retries_and_deletes(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    first = await gpu1.create_analysis(team.trajectory_id, "Radial Distribution Function")
    await pool.execute("update analyses set created_at = now() - interval '1 hour' where id = $1", first)
    second = await gpu1.create_analysis(team.trajectory_id, "Radial Distribution Function")
    jobs = {}
    for analysis in (first, second):
        jobs[analysis] = await gpu1.submit(
            [
                {
                    "trajectory_id": team.trajectory_id,
                    "kind": "analysis",
                    "name": "Radial Distribution Function",
                    "analysis_id": analysis,
                    "frame": f,
                }
                for f in range(3)
            ]
        )
    await reported(gpu1, jobs[first][:2], "completed")
    await reported(gpu1, jobs[first][2:], "failed")
    # Two pipeline runs on one frame: two rows of the same name, told apart by when their run started.
    await open_panel(page, team.trajectory_id)
    await page.click("#panel [data-group='frame:0']")
    await page.wait_for_function(
        "document.querySelectorAll('#panel .row.job .run').length === 2 && [...document.querySelectorAll('#panel .row.job .run')].every(e => e.textContent.startsWith('run started'))"
    )
    labels = await page.eval_on_selector_all("#panel .row.job .run", "els => els.map(e => e.textContent)")
    assert len(set(labels)) == 2, labels
    # The listing: newest first, frames done and failed, when.
    await page.click("#tab-analyses")
    await page.wait_for_function("document.querySelectorAll('#panel tr[data-analysis]').length === 2")
    assert await page.eval_on_selector_all(
        "#panel tr[data-analysis]", "els => els.map(e => Number(e.dataset.analysis))"
    ) == [second, first]
    row = page.locator(f"#panel tr[data-analysis='{first}']")
    assert "2/3 frames done" in await row.inner_text() and "1 failed" in await row.inner_text()
    await row.locator("[data-retry-frames]").click()
    await page.locator(".toast.success", has_text="Queued 1 failed job(s) for retry").wait_for()
    # Delete asks first; Cancel keeps it, and focus goes back to the button.
    await row.locator("[data-delete]").click()
    await page.wait_for_selector("dialog[open] :text('Delete analysis Radial Distribution Function of 3 frames?')")
    await page.keyboard.press("Escape")
    assert await page.evaluate("document.activeElement.hasAttribute('data-delete')")
    await row.locator("[data-delete]").click()
    # The confirmation names where its retried job stops.
    await page.wait_for_selector("dialog[open] :text('Its 1 job still queued or running stop on cluster gpu-1')")
    await page.click("dialog[open] button[type='submit']")
    await page.locator(
        ".toast.success",
        has_text="Deleted analysis Radial Distribution Function: stopped 1 job(s), deleted 2 result(s)",
    ).wait_for()
    await page.wait_for_function("document.querySelectorAll('#panel tr[data-analysis]').length === 1")
    removed = await pool.fetchval(
        "select count(*) from jobs where id = any($1::bigint[]) and removed_at is not null", jobs[first]
    )
    assert removed == 3


async def test_the_analysis_listing_answers_the_shortcuts(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    older = await gpu1.create_analysis(team.trajectory_id, "Radial Distribution Function")
    await pool.execute("update analyses set created_at = now() - interval '1 hour' where id = $1", older)
    newer = await gpu1.create_analysis(team.trajectory_id, "Mean Squared Displacement")
    for analysis, name in ((older, "Radial Distribution Function"), (newer, "Mean Squared Displacement")):
        ids = await gpu1.submit(
            [
                {
                    "trajectory_id": team.trajectory_id,
                    "kind": "analysis",
                    "name": name,
                    "analysis_id": analysis,
                    "frame": 0,
                }
            ]
        )
        await reported(gpu1, ids, "failed" if analysis == older else "completed")
    await open_panel(page, team.trajectory_id, "Analyses")
    await page.wait_for_function("document.querySelectorAll('#panel tr[data-analysis]').length === 2")
    focused = "() => document.activeElement.dataset.analysis || null"
    # From the panel's tab, j goes to the panel's list (not the page's), then moves down it, k up, End, Home.
    await page.focus("#tab-analyses")
    await page.keyboard.press("j")
    assert await page.evaluate(focused) == str(newer)
    await page.keyboard.press("j")
    assert await page.evaluate(focused) == str(older)
    await page.keyboard.press("k")
    assert await page.evaluate(focused) == str(newer)
    await page.keyboard.press("End")
    assert await page.evaluate(focused) == str(older)
    # r retries the focused analysis's failed frames; focus stays on its row.
    await page.keyboard.press("r")
    await page.locator(".toast.success", has_text="Queued 1 failed job(s) for retry").wait_for()
    await page.wait_for_function(f"document.activeElement.dataset.analysis === '{older}'")
    # The action key: a menu of the row's actions; Escape gives focus back to the row.
    await page.keyboard.press("Home")
    await page.keyboard.press("a")
    await page.wait_for_selector(
        ".menu[aria-label='Actions of Mean Squared Displacement'] li:focus:text-is('Delete analysis')"
    )
    await page.keyboard.press("Escape")
    await page.wait_for_function(f"document.activeElement.dataset.analysis === '{newer}'")
    # Delete asks first; Cancel keeps it, and focus goes back to the row; confirmed, focus stays in the listing.
    await page.keyboard.press("Delete")
    await page.wait_for_selector("dialog[open] :text('Delete analysis Mean Squared Displacement of 1 frame?')")
    await page.keyboard.press("Escape")
    await page.wait_for_function(f"document.activeElement.dataset.analysis === '{newer}'")
    await page.keyboard.press("Delete")
    await page.click("dialog[open] button[type='submit']")
    await page.wait_for_function("document.querySelectorAll('#panel tr[data-analysis]').length === 1")
    await page.wait_for_function(f"document.activeElement.dataset.analysis === '{older}'")


# -- toasts that tell the truth, a busy state, and Submissions that look real


async def test_toasts_name_a_silent_cluster_and_wait_visibly(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, gpu2 = clusters
    await reported(
        gpu1,
        await gpu1.submit([{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "p", "frame": 0}]),
        "failed",
    )
    await reported(
        gpu2,
        await gpu2.submit([{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "p", "frame": 1}]),
        "preempted",
    )
    await page.click("#ring")
    await page.click(f"#popover [data-head='{team.trajectory_id}']", button="right")
    await page.click(".menu li:text-is('Retry Failed Jobs')")
    await page.wait_for_selector(
        ".toast.busy:has-text('Retry Failed Jobs: waiting for the clusters to confirm')"
    )  # up to GATEWAY_COMMAND_TIMEOUT (tests/conftest.py)
    # gpu-2 never confirms, but it did retry its (preempted) job, and its report says so: the toast ends on the
    # truth, as a confirmed answer would say it.
    await page.locator(
        ".toast.success",
        has_text=re.compile(
            r"^Queued 2 failed job\(s\) for retry \(1 of them preempted\); gpu-2 confirmed by its reports after \d+ s"
        ),
    ).wait_for()
    await page.wait_for_selector(".toast.busy", state="detached")
    # The Submissions page: the same truth.
    tasks = await gpu1.submit([{"trajectory_id": team.trajectory_id, "kind": "analysis", "name": "a", "frame": 0}])
    await gpu2.submit([{"trajectory_id": team.trajectory_id, "kind": "analysis", "name": "a", "frame": 1}])
    sid = await pool.fetchval("select submission_id from jobs where id = $1", tasks[0])
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.click(f"tr[data-sub='{sid}']", button="right")
    await page.click(".menu li:text-is('Hold')")
    await page.locator(
        ".toast.success", has_text=re.compile(r"^Held 2 task\(s\); gpu-2 confirmed by its reports after \d+ s")
    ).wait_for()
    # Toasts sit below the page, in its flow: they cover no control.
    toast = await page.locator("#toasts").bounding_box()
    main = await page.locator(".workspace").bounding_box()
    assert toast["y"] >= main["y"] + main["height"] - 1


async def test_hold_and_retry_failed_ask_first_only_when_a_cluster_holding_the_work_is_silent(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    """Retry Failed Jobs and Hold act at once while their clusters report (the test above); once gpu-2 has been
    silent for two hours they ask first, naming it, and Cancel does nothing."""
    gpu1, gpu2 = clusters
    failed = []
    for c, frame in ((gpu1, 0), (gpu2, 1)):
        ids = await c.submit([{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "p", "frame": frame}])
        await reported(c, ids, "failed")
        failed += ids
    tasks = await gpu1.submit([{"trajectory_id": team.trajectory_id, "kind": "analysis", "name": "a", "frame": 0}])
    tasks += await gpu2.submit([{"trajectory_id": team.trajectory_id, "kind": "analysis", "name": "a", "frame": 1}])
    await gpu2.flushed()
    gpu2_id = await pool.fetchval("select id from clusters where team_id = $1 and name = 'gpu-2'", team.id)
    await pool.execute(
        "update clusters set heard_at = now() - interval '2 hours', silent_since = now() - interval '2 hours'"
        " where id = $1",
        gpu2_id,
    )
    name = await pool.fetchval("select name from trajectories where id = $1", team.trajectory_id)
    await page.click("#ring")
    await page.click(f"#popover [data-head='{team.trajectory_id}']", button="right")
    await page.click(".menu li:text-is('Retry Failed Jobs')")
    dialog = page.locator("dialog[open]")
    await dialog.locator("h2", has_text=f"Retry 2 failed jobs of {name} on gpu-1 (1) and gpu-2 (1)?").wait_for()
    assert "gpu-2 has been silent for 2 h: it acts on this only once it reports again." in await dialog.inner_text()
    await page.keyboard.press("Escape")
    await dialog.wait_for(state="detached")
    # The Submissions page: Hold on tasks of gpu-1 and the silent gpu-2 asks first too.
    sid = await pool.fetchval("select submission_id from jobs where id = $1", tasks[0])
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.click(f"tr[data-sub='{sid}']", button="right")
    await page.click(".menu li:text-is('Hold')")
    await dialog.locator("h2", has_text="Hold 2 tasks of 1 submission on gpu-1 (1) and gpu-2 (1)?").wait_for()
    assert "gpu-2 has been silent for 2 h" in await dialog.inner_text()
    await page.click("dialog[open] button[type='submit']")
    # gpu-2 acts but never confirms: its part is not confirmed yet, or its reports have told since.
    await page.locator(".toast", has_text=re.compile(r"Held [12] task\(s\); (1 on gpu-2|gpu-2 confirmed)")).wait_for()
    # The cancelled retry did nothing: both failed jobs are on their first attempt still.
    rows = await pool.fetch("select status, attempts from jobs where id = any($1::bigint[])", failed)
    assert sorted((r["status"], r["attempts"]) for r in rows) == [("failed", 1), ("failed", 1)], rows


async def test_an_action_a_cluster_never_confirms_follows_its_reports_in_place(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    """gpu-2 acts but never confirms, and its reports come later than the gateway waits: the toast says at once
    what is not known ("not confirmed yet", never "0 of 4"), then the same toast says the true count as its
    reports land, without a reload. The same on the Submissions page."""
    _, gpu2 = clusters
    running = await gpu2.submit(
        [{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "p", "frame": f} for f in range(4)]
    )
    await reported(gpu2, running, "running")
    held: list[dict[str, Any]] = []
    report = gpu2.ingest.report
    gpu2.ingest.report = held.append  # type: ignore[method-assign]  # its reports wait until the test lets them go
    await page.click("#ring")
    head = page.locator(f"#popover [data-head='{team.trajectory_id}']")
    await head.click(button="right")
    await page.click(".menu li:text-is('Remove Running Jobs')")
    name = await pool.fetchval("select name from trajectories where id = $1", team.trajectory_id)
    await page.locator("dialog h2", has_text=f"Remove 4 jobs of {name} on gpu-2?").wait_for()
    await page.click("dialog[open] button[type='submit']")
    toast = page.locator(".toast.warning", has_text="Removing 4 job(s) on gpu-2: not confirmed yet")
    await toast.wait_for()
    await toast.evaluate("el => { el.dataset.seen = 'first words' }")  # the same element must say the truth
    assert len(held) == 4  # it did act: only its reports are late
    for r in held:
        report(r)
    await page.wait_for_function(
        """() => {
            const el = document.querySelector("#toasts .toast[data-seen='first words']");
            return el && el.classList.contains('success')
                && /^Removed 4 job\\(s\\); gpu-2 confirmed by its reports after \\d+ s$/.test(el.querySelector('.words').textContent);
        }""",
        timeout=30_000,
    )
    assert await page.locator("#toasts .toast").count() == 1
    assert "0 of" not in await page.inner_text("#toasts")
    # The Submissions page: Kill on gpu-2's tasks, the same truth.
    held.clear()
    tasks = await gpu2.submit(
        [{"trajectory_id": team.trajectory_id, "kind": "analysis", "name": "a", "frame": f} for f in range(3)]
    )
    await gpu2.flushed()
    sid = await pool.fetchval("select submission_id from jobs where id = $1", tasks[0])
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.click(f"tr[data-sub='{sid}']", button="right")
    await page.click(".menu li:text-is('Kill')")
    await page.locator("dialog h2", has_text="on gpu-2?").wait_for()
    await page.click("dialog[open] button[type='submit']")
    killing = page.locator(".toast.warning", has_text="Killing 3 task(s) on gpu-2: not confirmed yet")
    await killing.wait_for()
    await killing.evaluate("el => { el.dataset.seen = 'first words' }")
    assert len(held) == 3
    for r in held:
        report(r)
    await page.wait_for_function(
        """() => {
            const el = document.querySelector("#toasts .toast[data-seen='first words']");
            return el && el.classList.contains('success')
                && /^Killed 3 task\\(s\\); gpu-2 confirmed by its reports after \\d+ s$/.test(el.querySelector('.words').textContent);
        }""",
        timeout=30_000,
    )


async def test_an_outcome_whose_cluster_never_reports_says_after_a_minute_what_is_unaccounted_for(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    """gpu-2 neither confirms nor reports: the toast stops waiting after a minute and says how many are still
    unaccounted for, and where, instead of a zero or of waiting for ever."""
    _, gpu2 = clusters
    running = await gpu2.submit(
        [{"trajectory_id": team.trajectory_id, "kind": "preprocess", "name": "p", "frame": f} for f in range(2)]
    )
    await reported(gpu2, running, "running")
    gpu2.ingest.report = lambda report: None  # type: ignore[method-assign]  # its reports never come
    await page.clock.install()  # the page's clock, moved on by the test below
    await page.reload()
    await page.wait_for_function("window.gatewayLive && document.body.dataset.live === 'live'")
    await page.click("#ring")
    await page.click(f"#popover [data-head='{team.trajectory_id}']", button="right")
    await page.click(".menu li:text-is('Remove Running Jobs')")
    await page.click("dialog[open] button[type='submit']")
    toast = page.locator(".toast.warning", has_text="Removing 2 job(s) on gpu-2: not confirmed yet")
    await toast.wait_for()
    await toast.evaluate("el => { el.dataset.seen = 'first words' }")
    await page.clock.fast_forward(61_000)
    await page.wait_for_function(
        """() => {
            const el = document.querySelector("#toasts .toast.warning[data-seen='first words']");
            return el && /^Removing 2 job\\(s\\); 2 on gpu-2 still unaccounted for after \\d+ s$/.test(
                el.querySelector('.words').textContent);
        }""",
        timeout=30_000,
    )


async def test_submissions_edit_dialogs_validate_and_reviewed_toggles(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, clusters: tuple[SimCluster, SimCluster]
) -> None:
    gpu1, _ = clusters
    sid = await gpu1.create_submission(
        title="Render of frames 1-100", project="membranes", user_id=team.user_id, trajectory_id=team.trajectory_id
    )
    await page.goto(f"{stack.nodes[0].http}/submissions")
    row = page.locator(f"tr[data-sub='{sid}']")
    await row.wait_for()
    assert (await row.locator("td[data-col='user']").inner_text()).startswith("user ")  # USER: who submitted it
    # Edit / Priority checks in the dialog: nothing is sent until it is a number.
    await row.click(button="right")
    await page.click(".menu li:text-is('Edit / Priority')")
    await page.fill("dialog input[name='priority']", "high")
    await page.keyboard.press("Enter")
    await page.wait_for_selector("dialog .dialog-error:text('Enter a whole number from -1000 to 1000.')")
    assert await page.get_attribute("dialog input[name='priority']", "aria-invalid") == "true"
    await page.fill("dialog input[name='priority']", "12")
    await page.keyboard.press("Enter")
    await page.locator(".toast", has_text="Priority set to 12 on 1 submission(s)").wait_for()
    await page.wait_for_function(f"document.activeElement.dataset.sub === '{sid}'")  # focus is back on the row
    # Edit / Instance Type offers the cluster's instance types, nothing else; a spot type makes it PREEMPTIBLE.
    await row.click(button="right")
    await page.click(".menu li:text-is('Edit / Instance Type')")
    await page.wait_for_selector("dialog[open] select[name='instance_type']")
    options = await page.eval_on_selector_all(
        "dialog select[name='instance_type'] option", "els => els.map(e => e.value)"
    )
    assert options == ["standard", "standard-spot", "highmem", "highcpu", "highcpu-spot", "gpu-large"]
    await page.select_option("dialog select[name='instance_type']", "highcpu-spot")
    await page.click("dialog button[type='submit']")
    await page.locator(".toast", has_text="Instance type set to highcpu-spot on 1 submission(s)").wait_for()
    await page.wait_for_function(
        f"document.querySelector(\"tr[data-sub='{sid}'] td[data-col='preemptible']\").textContent === 'yes'"
    )
    assert await row.locator("td[data-col='cores']").inner_text() == "32"
    # Reviewed toggles.
    await row.click(button="right")
    assert await page.get_attribute(".menu li:text-is('Reviewed')", "aria-checked") == "false"
    await page.click(".menu li:text-is('Reviewed')")
    await page.locator(".toast", has_text="Marked 1 submission(s) reviewed").wait_for()
    await page.wait_for_function(f"document.querySelector(\"tr[data-sub='{sid}']\").classList.contains('reviewed')")
    await row.click(button="right")
    assert await page.get_attribute(".menu li:text-is('Reviewed')", "aria-checked") == "true"
    await page.click(".menu li:text-is('Reviewed')")
    await page.locator(".toast", has_text="Marked 1 submission(s) not reviewed").wait_for()
    await page.wait_for_function(f"!document.querySelector(\"tr[data-sub='{sid}']\").classList.contains('reviewed')")


async def test_the_popover_reads_as_the_document_says_and_its_links_close_it(
    page: Any, pool: asyncpg.Pool, team: Team
) -> None:
    ids = await insert_jobs(pool, team, 20)
    await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids[:12])
    await page.click("#ring")
    head = page.locator(f"#popover [data-head='{team.trajectory_id}']")
    await page.wait_for_function(
        f"document.querySelector(\"#popover [data-head='{team.trajectory_id}'] .progress\")?.textContent === '12/20 jobs completed'"
    )
    assert await head.locator(".name").get_attribute("title") == await head.locator(".name").inner_text()
    await page.click("#popover .open-clusters")
    await page.wait_for_selector("#popover", state="hidden")  # it does not stay open over the page it leads to
    await page.wait_for_selector("main h1:text('Clusters')")
    await page.click("#ring")
    await page.click("#popover .online")
    await page.wait_for_selector("#popover", state="hidden")
    await page.wait_for_selector("main h1:text('My Team')")


async def test_same_named_jobs_say_when_they_were_created_and_started(
    page: Any, pool: asyncpg.Pool, team: Team
) -> None:
    # Two jobs of one frame with one name and no pipeline run: their labels name each time for what it is.
    ids = [
        r["id"]
        for r in await pool.fetch(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame)"
            " select $1, $2, $3, 'preprocess', 'Preprocess trajectory frame', 0 from generate_series(1, 2)"
            " returning id",
            team.id,
            team.trajectory_id,
            team.cluster_id,
        )
    ]
    await pool.execute("update jobs set status = 'running' where id = $1", ids[0])
    await open_panel(page, team.trajectory_id)
    await page.click("#panel [data-group='frame:0']")
    await page.wait_for_function("document.querySelectorAll('#panel .row.job .run').length === 2")
    labels = await page.eval_on_selector_all("#panel .row.job .run", "els => els.map(e => e.textContent)")
    assert all(label.startswith("created ") for label in labels), labels
    assert sorted("started" in label for label in labels) == [False, True], labels  # one runs, one is queued
