"""In Chromium, signed in as a member: /submissions until its first window is drawn, then a sort click; / until the
first cards are drawn, then the popover and a search; and the page whose main thread the streaming phase watches."""

from __future__ import annotations

import json
import time
from typing import Any

from .common import CARD_PAGE, LOADS_PER_ROUND, TARGET_BROWSER_MS, TARGET_CARDS_MS, percentile
from .team import Team

LIVE = "window.gatewayLive && document.body.dataset.live === 'live'"
FIRST_ROW = "document.querySelector('tbody tr[data-sub]')?.dataset.sub"
# The pager's text once the first window is drawn ("1–100 of 100,000"); the page's clock then.
DRAWN = "() => (document.querySelector('.pager .range')?.textContent || '').includes(' of ') && performance.now()"
# The dashboard's count once its first cards are drawn ("100 of 1,001 trajectories"), the popover's ("300 of 1,001").
CARDS_COUNT = "document.querySelector('.cards-bar .count')?.textContent || ''"
CARDS_DRAWN = f"() => ({CARDS_COUNT}).includes(' of ') && performance.now()"
POP_COUNT = "document.querySelector('#popover .pop-count')?.textContent || ''"
# Every long task the page sees, with when it started on the page's clock; every window it read (when asked, when
# answered); and a count of animation frames.
WATCH_MAIN_THREAD = """
window.benchLongTasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.benchLongTasks.push([e.startTime, e.duration]);
}).observe({ type: 'longtask', buffered: true });
window.benchReads = [];
performance.setResourceTimingBufferSize(100000);
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    if (e.name.includes('/submissions?')) window.benchReads.push([e.startTime, e.responseEnd]);
  }
}).observe({ type: 'resource', buffered: true });
window.benchFrames = 0;
const benchTick = () => { window.benchFrames++; requestAnimationFrame(benchTick); };
requestAnimationFrame(benchTick);
"""
WINDOW_IDS = "() => [...document.querySelectorAll('tbody tr[data-sub]')].map((tr) => Number(tr.dataset.sub))"


def chromium() -> str | None:
    from harness.browser import chromium_path

    return chromium_path()


async def browser_rounds(base: str, token: str, rounds: int, first_by_priority: int) -> dict[str, Any]:
    """In Chromium: navigations to /submissions until the first window is drawn, each followed by a sort click."""
    from playwright.async_api import async_playwright

    from harness.browser import ARGS, sign_in

    loads: list[dict[str, float]] = []
    wrong: list[str] = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium(), args=ARGS)
        try:
            # Playwright's polling waits evaluate strings, which the Content-Security-Policy refuses: bypassed, as
            # in the browser tests.
            context = await browser.new_context(viewport={"width": 1200, "height": 800}, bypass_csp=True)
            page = await context.new_page()
            page.on("pageerror", lambda e: wrong.append(f"page error: {e}"))
            await sign_in(page, base, token)
            await page.wait_for_function(LIVE)
            for _ in range(rounds * LOADS_PER_ROUND):
                started = time.perf_counter()
                await page.goto(f"{base}/submissions", wait_until="commit")
                drawn = await page.wait_for_function(DRAWN, timeout=60_000)
                first_rows = (time.perf_counter() - started) * 1000
                page_ms = float(await drawn.json_value())  # the page's clock: since its navigation started
                before = await page.evaluate(f"() => {FIRST_ROW}")
                started = time.perf_counter()
                await page.click("button[data-sort='priority']")
                await page.wait_for_function(f"() => {FIRST_ROW} !== {json.dumps(before)}", timeout=60_000)
                sort_ms = (time.perf_counter() - started) * 1000
                first = await page.evaluate(f"() => {FIRST_ROW}")
                if str(first) != str(first_by_priority):
                    wrong.append(f"sorted by priority, the first row is {first}, not {first_by_priority}")
                loads.append({"first_rows_ms": first_rows, "page_ms": page_ms, "sort_click_ms": sort_ms})
            await context.close()
        finally:
            await browser.close()
    firsts = [x["first_rows_ms"] for x in loads]
    sorts = [x["sort_click_ms"] for x in loads]
    return {
        "loads": loads,
        "first_rows_cold_ms": firsts[0],
        "first_rows_p50_ms": percentile(firsts, 50),
        "first_rows_max_ms": max(firsts),
        "sort_click_p50_ms": percentile(sorts, 50),
        "sort_click_max_ms": max(sorts),
        "within_target": max(firsts) <= TARGET_BROWSER_MS,
        "wrong": wrong,
    }


async def new_page(browser: Any, wrong: list[str]) -> tuple[Any, Any]:
    """A context and its page, 1200 x 800, whose main thread is watched from its first script (WATCH_MAIN_THREAD)."""
    # Playwright's polling waits evaluate strings, which the Content-Security-Policy refuses: bypassed, as in the
    # browser tests.
    context = await browser.new_context(viewport={"width": 1200, "height": 800}, bypass_csp=True)
    await context.add_init_script(WATCH_MAIN_THREAD)
    page = await context.new_page()
    page.on("pageerror", lambda e: wrong.append(f"page error: {e}"))
    return context, page


async def dashboard_rounds(base: str, team: Team, rounds: int, term: str, found: int) -> dict[str, Any]:
    """In Chromium: navigations to / until the first cards are drawn, each followed by the popover opened and
    closed (once the team channel is live) and a search typed into the cards' box."""
    from playwright.async_api import async_playwright

    from harness.browser import ARGS, sign_in

    loads: list[dict[str, float]] = []
    wrong: list[str] = []
    total = f"{team.trajectories:,}"
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium(), args=ARGS)
        try:
            context, page = await new_page(browser, wrong)
            await sign_in(page, base, team.token)
            await page.wait_for_function(LIVE)
            for _ in range(rounds * LOADS_PER_ROUND):
                started = time.perf_counter()
                await page.goto(f"{base}/", wait_until="commit")
                drawn = await page.wait_for_function(CARDS_DRAWN, timeout=60_000)
                first_cards = (time.perf_counter() - started) * 1000
                page_ms = float(await drawn.json_value())
                count = await page.evaluate(f"() => {CARDS_COUNT}")
                cards = await page.evaluate("() => document.querySelectorAll('.cards .card[data-card]').length")
                if f"of {total} " not in count or cards != min(CARD_PAGE, team.trajectories):
                    wrong.append(f"first cards: {cards} drawn, the count reads {count!r}")
                await page.wait_for_function(LIVE, timeout=60_000)
                live_ms = (time.perf_counter() - started) * 1000
                started = time.perf_counter()
                await page.click("#ring")
                await page.wait_for_function(f"() => ({POP_COUNT}).includes(' of ')", timeout=60_000)
                popover_ms = (time.perf_counter() - started) * 1000
                pop = await page.evaluate(f"() => {POP_COUNT}")
                if not pop.endswith(f" of {total}"):
                    wrong.append(f"the popover's count reads {pop!r}")
                await page.click("#ring")
                await page.wait_for_selector("#popover", state="hidden")
                started = time.perf_counter()
                await page.fill(".cards-bar input[name=q]", term)
                await page.wait_for_function(
                    f"() => ({CARDS_COUNT}) !== {json.dumps(count)} && ({CARDS_COUNT}).includes(' of ')",
                    timeout=60_000,
                )
                search_ms = (time.perf_counter() - started) * 1000
                searched = await page.evaluate(f"() => {CARDS_COUNT}")
                if not searched.startswith(f"{found:,} of {found:,} "):
                    wrong.append(f"searched for {term!r}, the count reads {searched!r}")
                loads.append(
                    {
                        "first_cards_ms": first_cards,
                        "page_ms": page_ms,
                        "live_ms": live_ms,
                        "popover_ms": popover_ms,
                        "search_ms": search_ms,
                    }
                )
            await context.close()
        finally:
            await browser.close()

    def figures(key: str) -> dict[str, float | None]:
        values = [x[key] for x in loads]
        return {"cold_ms": values[0], "p50_ms": percentile(values, 50), "max_ms": max(values)}

    return {
        "loads": loads,
        "first_cards": figures("first_cards_ms"),
        "live": figures("live_ms"),
        "popover": figures("popover_ms"),
        "search": figures("search_ms"),
        "within_target": max(x["first_cards_ms"] for x in loads) <= TARGET_CARDS_MS,
        "wrong": wrong,
    }
