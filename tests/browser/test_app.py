"""What a person sees in the web app, in real Chromium, against real gateway processes."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from gateway.sim.cluster import SimCluster
from tests.browser.helpers import csp_violations, open_groups, sign_in
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs
from tests.integration.test_submission_windows import saved

ROOT = Path(__file__).resolve().parents[2]


async def test_token_in_the_url_becomes_an_httponly_cookie_and_leaves_the_url(page: Any, stack: Stack) -> None:
    assert page.url == f"{stack.nodes[0].http}/"
    (cookie,) = await page.context.cookies()
    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == ("gateway_token", True, "Strict")
    assert await page.evaluate("document.cookie") == ""  # no script can read it


async def test_a_sign_in_links_token_leaves_the_address_bar_and_rides_in_no_referer(
    browser: Any, stack: Stack, team: Team
) -> None:
    """Proxies log Referer: none of the confirmation page's requests (its style, its script, the button's post)
    nor the app's after it carries the token, and the address bar drops it as the page loads."""
    context = await browser.new_context()
    try:
        page = await context.new_page()
        requests: list[Any] = []
        page.on("request", lambda request: requests.append(request))
        base = stack.nodes[0].http
        await page.goto(f"{base}/?token={team.token}")
        await page.wait_for_selector("#confirm-sign-in")
        assert team.token not in await page.evaluate("location.href")
        await page.click("#confirm-sign-in")
        await page.wait_for_selector("body[data-live='live']")
        assert page.url == f"{base}/"
        assert [c["name"] for c in await context.cookies()] == ["gateway_token"]
        paths = {urlsplit(r.url).path for r in requests}
        assert {"/style.css", "/js/confirm.js", "/sign-in", "/js/app.js"} <= paths
        for request in requests:
            headers = await request.all_headers()
            assert team.token not in headers.get("referer", ""), request.url
            if request.method == "POST" and request.url == f"{base}/sign-in":
                assert headers["origin"] == base  # the fetch keeps it: the check on /sign-in passes
    finally:
        await context.close()


async def test_the_app_runs_under_its_content_security_policy(browser: Any, stack: Stack, team: Team) -> None:
    """Signing in through the link's confirmation, the dashboard and the Submissions page (its bars are sized
    through the CSSOM), with the policy enforced: nothing is refused."""
    cluster = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await cluster.start()
    context = await browser.new_context()
    try:
        await cluster.submit(
            [
                {
                    "trajectory_id": team.trajectory_id,
                    "kind": "preprocess",
                    "name": "Preprocess trajectory frame",
                    "frame": i,
                }
                for i in range(2)
            ]
        )
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        csp_violations(page, errors)
        base = stack.nodes[0].http
        await page.goto(f"{base}/?token={team.token}")
        heading = await page.inner_text("h1")
        assert heading.startswith("Sign in as user ") and heading.endswith("?")
        assert page.url == f"{base}/"  # the token left the address bar and the history (the form keeps it)
        assert await context.cookies() == []  # the link alone signs nobody in
        await page.click("#confirm-sign-in")
        await page.wait_for_selector("body[data-live='live']")
        assert [c["name"] for c in await context.cookies()] == ["gateway_token"]
        await page.goto(f"{base}/submissions")
        bar = await page.wait_for_selector("tr[data-sub] .bar[aria-label='2 queued']")
        assert await bar.evaluate("e => getComputedStyle(e).backgroundImage.startsWith('linear-gradient(')")
        assert errors == []
    finally:
        await context.close()
        await cluster.stop()


async def test_ring_label_and_counts_follow_job_changes(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    ids = await insert_jobs(pool, team, 5)
    await page.wait_for_function("document.getElementById('ring-label').textContent === '5 queued'")
    await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids[:2])
    await page.wait_for_function("document.getElementById('ring-label').textContent === '2 running'")
    assert await page.title() == "2 running - Jobs"  # the tab says it too, for a person in another tab
    await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
    await page.wait_for_function("document.getElementById('ring-label').textContent === 'Jobs'")
    assert await page.title() == "Jobs"
    await page.click("#ring")
    counts = await page.inner_text(".counts")
    assert counts.split() == ["0", "Queued", "0", "Running", "5", "Done", "0", "Failed"]
    assert await page.get_attribute("#ring-fill", "stroke-dasharray") == "100 100"


async def test_a_click_on_the_ring_before_the_app_has_started_opens_the_popover(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """A person who clicks the ring as the page appears gets the popover: the click lands while the app still waits
    for /api/me (held here until then), and the popover opens once the app can draw it."""
    await insert_jobs(pool, team, 2)
    asked, clicked = asyncio.Event(), asyncio.Event()

    async def hold(route: Any) -> None:
        asked.set()
        await clicked.wait()
        await route.continue_()

    await page.route("**/api/me", hold)
    await page.goto(f"{stack.nodes[0].http}/", wait_until="commit")
    await asyncio.wait_for(asked.wait(), 30)  # the app's modules run and wait for the person: none listens yet
    await page.click("#ring")
    assert await page.get_attribute("#ring", "aria-expanded") == "true"  # taken at once
    assert await page.is_hidden("#popover")
    clicked.set()
    await page.wait_for_selector("#popover", state="visible", timeout=30_000)
    await page.wait_for_selector("#popover [data-head]", timeout=30_000)  # then its list, once the snapshot comes
    assert await page.get_attribute("#ring", "aria-expanded") == "true"


async def test_the_menu_button_at_360_px_opens_before_the_app_has_started(page: Any, stack: Stack, team: Team) -> None:
    """At 360 px the pages and Sign out open from the header's menu button, which shows from the first paint. Tapped
    while the app still read who the person is, it did nothing (a whole suite: Sign out was never found)."""
    asked, tapped = asyncio.Event(), asyncio.Event()

    async def hold(route: Any) -> None:
        asked.set()
        await tapped.wait()
        await route.continue_()

    await page.set_viewport_size({"width": 360, "height": 800})
    await page.route("**/api/me", hold)
    await page.goto(f"{stack.nodes[0].http}/", wait_until="commit")
    await asyncio.wait_for(asked.wait(), 30)  # the app's modules run and wait for /api/me
    await page.click("#nav-toggle")
    assert await page.get_attribute("#nav-toggle", "aria-expanded") == "true"
    tapped.set()
    await page.get_by_role("button", name="Sign out").wait_for(timeout=30_000)  # in the open menu once signed in


async def test_the_popover_counts_nothing_before_its_first_snapshot(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """Opened before the team's first snapshot has come (a slow link holds the server's messages back here), the
    popover says its counts are not known yet, not "0 Queued": then the snapshot's counts, once it comes."""
    await insert_jobs(pool, team, 2)
    held: list[tuple[Any, str | bytes]] = []
    released = False

    def route(ws: Any) -> None:
        server = ws.connect_to_server()  # the real node: only its messages to the page wait

        def from_server(message: str | bytes) -> None:
            if released:
                ws.send(message)
            else:
                held.append((ws, message))

        server.on_message(from_server)

    await page.route_web_socket(re.compile(r"/ws"), route)
    await page.goto(f"{stack.nodes[0].http}/")
    await page.click("#ring")
    await page.wait_for_selector("#popover", state="visible", timeout=30_000)
    buckets = page.locator("#popover [data-bucket]:not([data-bucket='silent'])")
    assert await buckets.all_inner_texts() == ["–", "–", "–", "–"]
    assert await page.get_attribute("#popover .counts", "aria-busy") == "true"
    assert await page.locator("#popover .empty").inner_text() == "Loading…"
    released = True
    for ws, message in held:  # in the order the node sent them
        ws.send(message)
    await page.wait_for_function(
        "document.querySelector(\"#popover [data-bucket='queued']\").textContent === '2'", timeout=30_000
    )
    assert await page.get_attribute("#popover .counts", "aria-busy") is None


async def test_expanding_a_trajectory_shows_frames_and_jobs_in_their_colours(
    page: Any, pool: asyncpg.Pool, team: Team
) -> None:
    rdf = await pool.fetchval(
        "insert into analyses (trajectory_id, plugin) values ($1, 'Radial Distribution Function') returning id",
        team.trajectory_id,
    )
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, analysis_id, kind, name, frame, timestep, status, error) values"
        " ($1, $2, $3, null, 'analysis', 'Polyhedral Template Matching', 0, 0.5, 'completed', null),"
        " ($1, $2, $3, $4, 'analysis', 'Radial Distribution Function', 0, 0.5, 'failed', 'cutoff radius must be positive'),"
        " ($1, $2, $3, null, 'preprocess', 'Preprocess trajectory frame', 1, 1.0, 'running', null),"
        " ($1, $2, $3, null, 'storage_transfer', 'Storage Transfer', null, null, 'queued', null)",
        team.id,
        team.trajectory_id,
        team.cluster_id,
        rdf,
    )
    await page.click("#ring")
    await page.click(f"[data-head='{team.trajectory_id}']")
    await page.wait_for_selector("[data-group='transfers'][aria-expanded='true']")  # transfers open by themselves...
    assert await page.locator("[data-group='frame:0'][aria-expanded='false']").count() == 1  # ...and only they do
    await page.click("[data-group='frame:0']")
    groups = await page.eval_on_selector_all(
        "[data-group]", "els => els.map(e => [e.dataset.group, e.className, e.innerText])"
    )
    by_key = {k: (cls, text) for k, cls, text in groups}
    assert (
        "neutral" in by_key["frame:0"][0] and "Frame 0" in by_key["frame:0"][1] and "t = 0.5 ps" in by_key["frame:0"][1]
    )
    assert "blue" in by_key["frame:1"][0] and "running" in by_key["frame:1"][1]
    assert "amber" in by_key["transfers"][0] and "Storage Transfer" in by_key["transfers"][1]
    failed = await page.inner_text(".row.job.red")
    assert "Radial Distribution Function" in failed and "cutoff radius must be positive" in failed and "Retry" in failed
    assert await page.locator(".row.job.green").count() == 1


async def test_a_finish_makes_the_toast_and_the_glow_appear(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    ids = await insert_jobs(pool, team, 3)
    await page.wait_for_selector(f"[data-menu='{team.trajectory_id}']")
    await page.click(f"[data-menu='{team.trajectory_id}']")
    await page.click("text=Compute jobs")
    await page.wait_for_selector("#panel [data-group]")
    await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", ids)
    toast = page.locator(".toast", has_text="Jobs completed successfully")
    await toast.wait_for()
    await page.wait_for_selector(f"[data-card='{team.trajectory_id}'].glow")
    # 3.5 s later it stops glowing and folds with the finished ones.
    await page.wait_for_selector(
        f".finished-cards [data-card='{team.trajectory_id}']:not(.glow)", state="attached", timeout=6000
    )


async def test_the_panel_shows_only_that_trajectory(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    other = await pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, 'Other one') returning id", team.id
    )
    mine = await insert_jobs(pool, team, 2)
    await insert_jobs(pool, team, 4, trajectory_id=other)
    await page.reload()
    await page.click(f"[data-menu='{team.trajectory_id}']")
    await page.click("text=Compute jobs")
    await open_groups(page, "#panel", 2)
    await page.wait_for_function("document.querySelectorAll('#panel .row.job').length === 2")
    shown = await page.eval_on_selector_all("#panel .row.job", "els => els.map(e => Number(e.dataset.job))")
    assert sorted(shown) == sorted(mine)


async def test_right_click_actions_show_the_gateways_toasts_and_the_list_changes(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    cluster = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await cluster.start()
    try:
        await cluster.submit(
            [
                {
                    "trajectory_id": team.trajectory_id,
                    "kind": "preprocess",
                    "name": "Preprocess trajectory frame",
                    "frame": i,
                }
                for i in range(3)
            ]
        )
        failed = await cluster.submit(
            [
                {
                    "trajectory_id": team.trajectory_id,
                    "kind": "preprocess",
                    "name": "Preprocess trajectory frame",
                    "frame": 9,
                }
            ]
        )
        cluster.jobs[failed[0]].status = "failed"
        cluster._report(cluster.jobs[failed[0]], error="boom")
        await cluster.flushed()
        await cluster.flushed()
        await page.click("#ring")
        head = page.locator(f"[data-head='{team.trajectory_id}']")
        await head.click(button="right")
        await page.click("role=menuitem[name='Remove Running Jobs']")
        # It cannot be undone: it asks first, with how many jobs on which cluster; Escape does nothing.
        name = await pool.fetchval("select name from trajectories where id = $1", team.trajectory_id)
        await page.locator("dialog h2", has_text=f"Remove 3 jobs of {name} on gpu-1?").wait_for()
        await page.keyboard.press("Escape")
        await page.wait_for_selector("dialog", state="detached")
        assert (
            await pool.fetchval(
                "select count(*) from jobs where trajectory_id = $1 and removed_at is null", team.trajectory_id
            )
            == 4
        )
        await head.click(button="right")
        await page.click("role=menuitem[name='Remove Running Jobs']")
        await page.click("dialog button[type='submit']")
        await page.locator(".toast", has_text="Removed 3 job(s)").wait_for()
        await head.click()
        await open_groups(page, "#popover", 1)
        await page.wait_for_function("document.querySelectorAll('#popover .row.job').length === 1")
        await head.click(button="right")
        await page.click("role=menuitem[name='Retry Failed Jobs']")
        await page.locator(".toast", has_text="Queued 1 failed job(s) for retry").wait_for()
        await page.wait_for_selector("#popover .row.job.amber")
    finally:
        await cluster.stop()


async def test_a_dropped_connection_recovers_without_stale_state(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    ids = await insert_jobs(pool, team, 4)
    await page.wait_for_function("document.getElementById('ring-label').textContent === '4 queued'")
    await page.evaluate("window.gatewayLive.ws.close()")
    await page.wait_for_function("document.getElementById('conn').textContent.includes('reconnecting')")
    await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids[:3])
    await page.wait_for_function("document.getElementById('ring-label').textContent === '3 running'", timeout=20000)
    assert await page.inner_text("#conn") == "live"


async def test_the_header_says_how_fresh_the_screen_is_and_draws_it_stale_while_the_socket_is_down(
    page: Any, pool: asyncpg.Pool, team: Team
) -> None:
    """While the socket was down the header read "reconnecting…" but rows and counts looked as live as ever and
    nothing said how old they were; while live, nothing said so."""
    await insert_jobs(pool, team, 2)
    await page.wait_for_function("document.getElementById('ring-label').textContent === '2 queued'")
    assert await page.inner_text("#conn") == "live"
    await page.wait_for_function("(document.getElementById('conn').title || '').includes('newest change')")
    opacity = "() => getComputedStyle(document.querySelector('main')).opacity"
    assert await page.evaluate(opacity) == "1"
    await page.context.set_offline(True)  # the socket cut, and no way back until it is restored
    await page.evaluate("window.gatewayLive.ws.close()")
    await page.wait_for_function(
        "/^reconnecting: showing \\d\\d:\\d\\d:\\d\\d$/.test(document.getElementById('conn').textContent)"
    )
    assert await page.evaluate("document.body.dataset.live") == "reconnecting"
    assert float(await page.evaluate(opacity)) < 1  # rows and counts visibly stale
    await page.context.set_offline(False)
    await page.wait_for_function("document.getElementById('conn').textContent === 'live'", timeout=30_000)
    assert await page.evaluate(opacity) == "1"


async def test_ages_are_sane_with_a_skewed_browser_clock(
    browser: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    context = await browser.new_context()
    page = await context.new_page()
    await page.clock.install()
    await page.clock.set_system_time(await page.evaluate("Date.now()") + 3 * 3600 * 1000)  # three hours ahead
    await page.clock.resume()
    await insert_jobs(pool, team, 1)
    await sign_in(page, stack.nodes[0].http, team.token)
    await page.click(f"[data-menu='{team.trajectory_id}']")
    await page.click("text=Compute jobs")
    await open_groups(page, "#panel", 1)
    when = await (await page.wait_for_selector("#panel .row.job .when")).inner_text()
    assert when in ("just now",) or when.endswith("s ago"), when
    await context.close()


async def test_the_browser_runs_the_same_rule_vectors(page: Any) -> None:
    vectors = json.loads((ROOT / "frontend" / "vectors" / "jobs-view.json").read_text())
    failures = await page.evaluate(
        """async (v) => {
            const r = await import('/js/rules.js');
            const bad = [];
            const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);
            v.statuses.forEach(c => eq([r.word(c.status), r.colour(c.status), r.BUCKET_OF[c.status] ?? null], [c.word, c.colour, c.bucket]) || bad.push(['statuses', c]));
            v.buckets.forEach(c => eq(r.buckets(c.counts), c.expect) || bad.push(['buckets', c]));
            v.group_status.forEach(c => r.groupStatus(c.counts) === c.expect || bad.push(['group_status', c]));
            v.colour.forEach(c => r.colour(c.status) === c.expect || bad.push(['colour', c]));
            v.ring_label.forEach(c => r.ringLabel(c.counts) === c.expect || bad.push(['ring_label', c]));
            v.ring_fill.forEach(c => r.ringFill(c.counts) === c.expect || bad.push(['ring_fill', c]));
            v.group_key.forEach(c => r.groupKey(c.kind, c.frame) === c.expect || bad.push(['group_key', c]));
            v.group_label.forEach(c => r.groupLabel(c.key, c.jobs) === c.expect || bad.push(['group_label', c]));
            v.group_opens_by_itself.forEach(c => r.groupOpensByItself(c.key) === c.expect || bad.push(['opens', c]));
            v.notice_title.forEach(c => eq(r.noticeTitle(c.analysis, c.rasterize, c.failed), c.expect) || bad.push(['notice', c]));
            v.attempt_label.forEach(c => r.attemptLabel(c.attempts) === c.expect || bad.push(['attempt_label', c]));
            v.listed_status.forEach(c => r.listedStatus(c.job) === c.expect || bad.push(['listed_status', c]));
            return bad;
        }""",
        vectors,
    )
    assert failures == []


async def test_popover_and_menus_work_by_keyboard(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    await insert_jobs(pool, team, 1)
    await page.wait_for_function("document.getElementById('ring-label').textContent === '1 queued'")
    await page.focus("#ring")
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#popover:not([hidden])")
    assert await page.get_attribute("#ring", "aria-expanded") == "true"
    assert await page.evaluate("document.activeElement.dataset.head") == str(team.trajectory_id)
    await page.keyboard.press("Enter")  # expands the focused trajectory
    await page.wait_for_selector(f"[data-head='{team.trajectory_id}'][aria-expanded='true']")
    await page.keyboard.press("Escape")
    await page.wait_for_selector("#popover", state="hidden")
    assert await page.evaluate("document.activeElement.id") == "ring"


async def test_big_trajectory_stays_small_in_the_dom_and_draws_once_a_frame(
    page: Any, pool: asyncpg.Pool, team: Team
) -> None:
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, timestep)"
        " select $1, $2, $3, 'analysis', p, f, f * 0.5 from generate_series(0, 9999) f,"
        " unnest(array['Polyhedral Template Matching', 'Radial Distribution Function', 'Common Neighbor Analysis']) p",
        team.id,
        team.trajectory_id,
        team.cluster_id,
    )
    await page.evaluate("""() => {
        window.longTasks = [];
        new PerformanceObserver(list => list.getEntries().forEach(e => window.longTasks.push(e.duration))).observe({ entryTypes: ['longtask'] });
    }""")
    # Open the panel once the 30,000 new jobs have all been streamed (the card says so), as a person would.
    await page.wait_for_selector(f"[data-card='{team.trajectory_id}'] >> text=0/30,000 jobs", timeout=60000)
    await page.click(f"[data-menu='{team.trajectory_id}']")
    await page.click("text=Compute jobs")
    await page.wait_for_function("document.querySelectorAll('#panel [data-group]').length > 0", timeout=60000)
    await page.wait_for_function(
        f"window.gatewayLive.channels.get('trajectory:{team.trajectory_id}').ready", timeout=60000
    )
    for top in (0, 50_000, 400_000, 10_000_000):
        await page.evaluate(f"document.querySelector('#panel .tree-scroll').scrollTop = {top}")
        await page.wait_for_timeout(50)
        rows = await page.evaluate("document.querySelectorAll('#panel .row').length")
        assert 0 < rows <= 300, (
            top,
            rows,
            await page.evaluate(
                "[document.querySelector('#panel .tree-scroll').scrollTop, document.querySelector('#panel .tree-scroll').scrollHeight, document.querySelector('#panel .rows').innerHTML.slice(0, 200)]"
            ),
        )
    # A burst: about 5,000 updates a second for three seconds, while we count long tasks and draws per frame.
    await page.evaluate("""() => {
        window.longTasks = []; window.gatewayStats.draws = 0; window.frames = 0;
        const tick = () => { window.frames++; if (window.counting) requestAnimationFrame(tick); };
        window.counting = true; requestAnimationFrame(tick);
    }""")
    ids = [
        r["id"]
        for r in await pool.fetch("select id from jobs where trajectory_id = $1 order by id", team.trajectory_id)
    ]
    for second in range(3):
        for part in range(10):
            chunk = ids[(second * 5000 + part * 500) % len(ids) :][:500]
            await pool.execute(
                "update jobs set status = $2 where id = any($1::bigint[])",
                chunk,
                ("running", "completed")[(second + part) % 2],
            )
            await asyncio.sleep(0.1)
    await page.wait_for_timeout(1000)
    stats = await page.evaluate(
        "() => { window.counting = false; return { long: window.longTasks, draws: window.gatewayStats.draws, frames: window.frames }; }"
    )
    assert stats["draws"] <= stats["frames"] + 1, stats  # at most one render per animation frame
    # How long the main thread was busy is a speed figure, which a shared machine moves (a 63 ms long task
    # failed this test beside a CPU-bound process): printed here, not asserted.
    print(f"long tasks during the burst: {sorted(stats['long'], reverse=True)[:5]} ms")


async def test_submissions_page_multi_select_actions_sort_and_filter(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    cluster = SimCluster(stack.nodes[0].http, team.cluster_key, workers=0, report_metrics=False)
    await cluster.start()
    try:
        uploads = await cluster.submit(
            [
                {
                    "trajectory_id": team.trajectory_id,
                    "kind": "preprocess",
                    "name": "Preprocess trajectory frame",
                    "frame": i,
                }
                for i in range(3)
            ]
        )
        analyses = await cluster.submit(
            [
                {
                    "trajectory_id": team.trajectory_id,
                    "kind": "analysis",
                    "name": "Polyhedral Template Matching",
                    "frame": i,
                }
                for i in range(2)
            ]
        )
        a = await pool.fetchval("select submission_id from jobs where id = $1", uploads[0])
        b = await pool.fetchval("select submission_id from jobs where id = $1", analyses[0])
        # Opened once the relay saved both, as a person opens it after submitting: a row saved after the page's
        # read is announced ("1 new, show"), not slipped into the table, and a busy machine may save it that late.
        await saved(stack, team, await pool.fetchval("select count(*) from submissions where team_id = $1", team.id))
        await page.goto(f"{stack.nodes[0].http}/submissions")
        await page.wait_for_selector(f"tr[data-sub='{a}']")
        await page.wait_for_selector(f"tr[data-sub='{b}']")
        assert "pending" in await page.inner_text(f"tr[data-sub='{a}']")

        await page.click(f"tr[data-sub='{a}']")
        await page.click(f"tr[data-sub='{b}']", modifiers=["Control"])
        assert await page.locator("tr[aria-selected='true']").count() == 2
        await page.click(f"tr[data-sub='{b}']", button="right")
        await page.click("role=menuitem[name='Hold']")
        await page.locator(".toast", has_text="Held 5 task(s)").wait_for()
        await page.wait_for_function(f"document.querySelector(\"tr[data-sub='{a}']\").innerText.includes('holding')")

        await page.click(f"tr[data-sub='{b}']")
        await page.click(f"tr[data-sub='{b}']", button="right")
        await page.click("role=menuitem[name='Edit / Priority']")
        await page.fill("dialog input[name='priority']", "7")
        await page.click("dialog button[type='submit']")
        await page.locator(".toast", has_text="Priority set to 7 on 1 submission(s)").wait_for()
        assert await pool.fetchval("select priority from submissions where id = $1", b) == 7

        shown = "() => [...document.querySelectorAll('tbody tr[data-sub]')].map(e => Number(e.dataset.sub)).join()"
        await page.click("button[data-sort='priority']")  # ascending, then descending
        await page.wait_for_function(f"({shown})() === '{a},{b}'")
        await page.click("button[data-sort='priority']")
        await page.wait_for_function(f"({shown})() === '{b},{a}'")
        assert "sort=priority" in page.url and "dir=desc" in page.url  # the view is in the address
        await page.select_option("select[data-filter='status']", "holding")
        await page.wait_for_function(f"({shown})() === '{b},{a}' && location.search.includes('status=holding')")
        await page.select_option("select[data-filter='status']", "running")
        await page.wait_for_selector(".empty:text('No submissions match')")

        await page.select_option("select[data-filter='status']", "")
        await page.wait_for_function(f"({shown})() === '{b},{a}'")
        for item, toast, question, shows in (
            ("Unhold", "Released 5 task(s)", None, "holding"),
            ("Reviewed", "Marked 2 submission(s) reviewed", None, "pending"),
            ("Kill", "Killed 5 task(s)", "Kill 5 tasks of 2 submissions on gpu-1?", "pending"),
            ("Retry Failed", "Queued 5 failed task(s) for retry", None, "failed"),
            ("Retry", "Queued 5 task(s) for retry", "Retry 5 tasks of 2 submissions on gpu-1?", "pending"),
        ):
            # The menu offers what applies to the rows as they stand: wait until both show the last action's result.
            for sid in (a, b):
                await page.wait_for_function(
                    f"document.querySelector(\"tr[data-sub='{sid}']\").innerText.includes('{shows}')"
                )
            await page.click(f"tr[data-sub='{a}']")
            await page.click(f"tr[data-sub='{b}']", modifiers=["Shift"])  # a range: both rows
            await page.click(f"tr[data-sub='{a}']", button="right")
            await page.click(f".menu li:text-is('{item}')")
            if question is not None:  # it cannot be taken back: what it will do, in numbers, first
                await page.locator("dialog h2", has_text=question).wait_for()
                await page.click("dialog button[type='submit']")
            await page.locator(".toast", has_text=toast).last.wait_for()
        assert {
            r["status"]
            for r in await pool.fetch("select status from jobs where submission_id = any($1::bigint[])", [a, b])
        } == {"retrying"}

        await page.dblclick(f"tr[data-sub='{a}']")  # a row opens its tasks
        await open_groups(page, "#panel", 3)
        await page.wait_for_function("document.querySelectorAll('#panel .row.job').length === 3")
        await page.click("#panel .row.job >> nth=0", button="right")  # the same menu on a task
        await page.click("role=menuitem[name='Hold']")
        await page.locator(".toast", has_text="Held 1 task(s)").wait_for()
    finally:
        await cluster.stop()


async def test_identical_toasts_merge_and_count(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    await insert_jobs(pool, team, 2)  # nothing failed: Retry Failed Jobs finds nothing, three times
    await page.click("#ring")
    head = page.locator(f"[data-head='{team.trajectory_id}']")
    for times in (1, 2, 3):
        await head.click(button="right")
        await page.click("role=menuitem[name='Retry Failed Jobs']")
        await page.wait_for_function(
            "[...document.querySelectorAll('#toasts .toast')].some(t => t.textContent.includes("
            f"'No failed jobs found to retry') && t.dataset.count === '{times}')"
        )
    toasts = await page.eval_on_selector_all("#toasts .toast:not(.busy)", "els => els.map(e => e.innerText)")
    assert len(toasts) == 1 and "No failed jobs found to retry" in toasts[0] and "×3" in toasts[0], toasts


async def test_the_submissions_menu_offers_only_what_applies_to_every_selected_row(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """The menu offered every action whatever the rows: Hold on a downloaded submission."""
    done = await insert_jobs(pool, team, 2)
    await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", done)
    finished = await pool.fetchval("select submission_id from jobs where id = $1", done[0])
    other = await pool.fetchval("insert into trajectories (team_id, name) values ($1, 'menu') returning id", team.id)
    waiting = await insert_jobs(pool, team, 2, trajectory_id=other)
    pending = await pool.fetchval("select submission_id from jobs where id = $1", waiting[0])
    await page.goto(f"{stack.nodes[0].http}/submissions")
    menu = "() => [...document.querySelectorAll('.menu li')].map(li => li.textContent).join('|')"
    for rows, offered in (
        ([finished], "Retry|Reviewed|Edit / Priority"),
        ([pending], "Hold|Kill|Retry|Reviewed|Edit / Instance Type|Edit / Priority"),
        ([finished, pending], "Retry|Reviewed|Edit / Priority"),  # what applies to every one of them
    ):
        for sid in (finished, pending):
            await page.wait_for_selector(f"tr[data-sub='{sid}']")
        await page.wait_for_function(f"document.querySelector(\"tr[data-sub='{finished}']\").innerText.includes('2/2')")
        await page.click(f"tr[data-sub='{rows[0]}']")
        for sid in rows[1:]:
            await page.click(f"tr[data-sub='{sid}']", modifiers=["Control"])
        await page.click(f"tr[data-sub='{rows[0]}']", button="right")
        await page.wait_for_function(f"({menu})() === {offered!r}")
        await page.keyboard.press("Escape")


async def test_a_filter_holds_for_a_row_that_changed_while_its_window_was_read(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """`status=pending` kept showing a row whose status had moved on: it streamed in while the window was being
    read, the row streamed won over the read (it is newer), and nothing asked whether it still matched."""
    waiting = await insert_jobs(pool, team, 2)
    sid = await pool.fetchval("select submission_id from jobs where id = $1", waiting[0])
    await page.goto(f"{stack.nodes[0].http}/submissions?status=pending")
    row = f"tr[data-sub='{sid}']"
    await page.wait_for_selector(row)
    read, released = asyncio.Event(), asyncio.Event()

    async def late_window(route: Any) -> None:  # the window as read before the change, answered after it streamed
        response = await route.fetch()
        read.set()
        await released.wait()
        await route.fulfill(response=response)

    await page.route("**/api/teams/*/submissions?*", late_window)
    await page.click("button[data-sort='priority']")  # the view read again, its filter kept
    await read.wait()
    await pool.execute("update jobs set status = 'completed' where id = any($1::bigint[])", waiting)
    await page.wait_for_function(f"document.querySelector(\"{row}\")?.innerText.includes('success')")
    released.set()
    await page.mouse.move(5, 5)  # the pointer away from the table: nothing holds the window
    await page.wait_for_function(
        f'!document.querySelector("{row}") || document.querySelector("{row}").classList.contains(\'leaving\')',
        timeout=15_000,
    )


async def test_the_confirmation_of_an_action_on_a_silent_cluster_says_so_first(
    page: Any, pool: asyncpg.Pool, team: Team
) -> None:
    await insert_jobs(pool, team, 2)
    await pool.execute("update clusters set silent_since = now() - interval '5 minutes' where id = $1", team.cluster_id)
    await page.click("#ring")
    head = page.locator(f"[data-head='{team.trajectory_id}']")
    await head.click(button="right")
    await page.click("role=menuitem[name='Remove Running Jobs']")
    await page.locator(
        "dialog", has_text="gpu-1 has been silent for 5 min: it acts on this only once it reports again."
    ).wait_for()
    await page.keyboard.press("Escape")
