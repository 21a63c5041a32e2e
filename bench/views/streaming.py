"""Task changes streamed into the open /submissions window, about 1,000 a second, and the page's main thread
meanwhile (its long tasks, draws, frames and window reads): after a baseline without changes, once with the
pointer away from the table and once resting on a row."""

from __future__ import annotations

import asyncio
import os
import random
import time
from typing import Any

import asyncpg

from ..sql import BEHIND, FLIP
from .browser import DRAWN, LIVE, WINDOW_IDS, chromium, new_page
from .common import AFTER_READ_MS, LONG_TASK_MS, STREAM_RATE, STREAM_SETTLE, STREAM_TICK
from .team import Team


async def write_stream(pool: asyncpg.Pool, team: Team, seconds: float, rng: random.Random) -> dict[str, Any]:
    """STREAM_RATE task changes a second for `seconds`: every STREAM_TICK, one statement flipping half a batch of
    running tasks to completed and half of completed ones to running (so as many run throughout)."""
    per = round(STREAM_RATE * STREAM_TICK)
    running, completed = team.stream_running, team.stream_completed
    ticks = round(seconds / STREAM_TICK)
    written, late = 0, 0.0
    started = time.monotonic()
    for i in range(ticks):
        delay = started + i * STREAM_TICK - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            late = max(late, -delay)
        up = rng.sample(range(len(running)), min(per // 2, len(running)))
        down = rng.sample(range(len(completed)), min(per - len(up), len(completed)))
        flipped = [running[j] for j in up] + [completed[j] for j in down]
        await pool.execute(FLIP, flipped)
        for a, b in zip(up, down):  # pairs trade places: as many running as before
            running[a], completed[b] = completed[b], running[a]
        written += len(flipped)
    elapsed = time.monotonic() - started
    return {
        "changes": written,
        "batches": ticks,
        "seconds": round(elapsed, 2),
        "per_second": round(written / elapsed) if elapsed else 0,
        "latest_batch_ms": round(late * 1000, 1),  # the most a batch started behind its schedule
    }


async def caught_up(pool: asyncpg.Pool, team: Team, timeout: float = 60.0) -> float | None:
    """Until every streamed submission's saved row counts its completed tasks (the relay folded every change):
    the seconds it took, None after `timeout`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if not await pool.fetchval(BEHIND, team.stream_submissions):
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    return None


def long_task_figures(durations: list[float], span_ms: float) -> dict[str, Any]:
    total = sum(durations)
    return {
        "count": len(durations),
        "max_ms": round(max(durations, default=0.0), 1),
        "sum_ms": round(total, 1),
        "busy_share": round(total / span_ms, 4) if span_ms else None,  # the span's time in long tasks
        "over_target": sum(1 for d in durations if d > LONG_TASK_MS),
        "longest_ms": [round(d, 1) for d in sorted(durations, reverse=True)[:10]],
    }


async def stream_phases(base: str, pool: asyncpg.Pool, team: Team, seconds: float) -> dict[str, Any]:
    """In Chromium, /submissions open sorted by progress descending: task changes streamed into its window for
    `seconds`, the pointer away from the table, then resting on a row; the page's long tasks meanwhile."""
    from playwright.async_api import async_playwright

    from harness.browser import ARGS, sign_in

    wrong: list[str] = []
    phases: list[dict[str, Any]] = []
    streamed = set(team.stream_submissions)
    rng = random.Random(2)
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium(), args=ARGS)
        try:
            context, page = await new_page(browser, wrong)
            await sign_in(page, base, team.token)
            await page.goto(f"{base}/submissions?sort=progress&dir=desc")
            await page.wait_for_function(DRAWN, timeout=60_000)
            await page.wait_for_function(LIVE, timeout=60_000)

            async def point_at(selector: str) -> None:
                box = await page.locator(selector).bounding_box()
                assert box is not None, selector
                await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2, steps=5)

            # First a baseline: the same span without a change written (what the page and this machine do anyway).
            for pointer, changes in (("away", False), ("away", True), ("over a row", True)):
                await point_at("main h1" if pointer == "away" else "tbody tr[data-sub] >> nth=4")
                await page.wait_for_timeout(1_500)  # the page settles: a window read the pointer's leaving asked for
                shown = await page.evaluate(WINDOW_IDS)
                begin = await page.evaluate("() => [performance.now(), window.gatewayStats.draws, window.benchFrames]")
                load_before = os.getloadavg()[0]
                if changes:
                    writes = await write_stream(pool, team, seconds, rng)
                else:
                    await asyncio.sleep(seconds)
                    writes = {"changes": 0, "batches": 0, "seconds": seconds, "per_second": 0, "latest_batch_ms": 0.0}
                last_write = time.monotonic()
                relay = await caught_up(pool, team)
                rest = STREAM_SETTLE - (time.monotonic() - last_write)
                if rest > 0:
                    await asyncio.sleep(rest)
                end = await page.evaluate(
                    "() => [performance.now(), window.gatewayStats.draws, window.benchFrames, window.benchLongTasks,"
                    " window.benchReads]"
                )
                span = end[0] - begin[0]
                tasks = [(start, d) for start, d in end[3] if begin[0] <= start <= end[0]]
                durations = [d for _, d in tasks]
                answered = [done for asked, done in end[4] if begin[0] <= done <= end[0]]
                after_read = sum(
                    1 for start, _ in tasks if any(0 <= start - done <= AFTER_READ_MS for done in answered)
                )
                news = await page.evaluate(
                    "() => { const b = document.querySelector('main .news'); return b && !b.hidden ? b.textContent : null; }"
                )
                after = await page.evaluate(WINDOW_IDS)
                phases.append(
                    {
                        "pointer": pointer,
                        "changes": changes,
                        "writes": writes,
                        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # 1 min, before, after
                        "relay_caught_up_s": None if relay is None else round(relay, 2),
                        "observed_s": round(span / 1000, 2),
                        "long_tasks": {**long_task_figures(durations, span), "after_window_read": after_read},
                        "draws": end[1] - begin[1],
                        "frames": end[2] - begin[2],
                        "window_reads": len(answered),
                        "news": news,
                        "streamed_rows_in_window": {
                            "before": sum(1 for i in shown if i in streamed),
                            "after": sum(1 for i in after if i in streamed),
                        },
                        "window_rows_moved": shown != after,
                        "within_target": not any(d > LONG_TASK_MS for d in durations),
                    }
                )
                await point_at("main h1")  # away from the table: the order catches up
                await page.wait_for_timeout(2_000)
            await context.close()
        finally:
            await browser.close()
    return {
        "seconds": seconds,
        "rate": STREAM_RATE,
        "batch": round(STREAM_RATE * STREAM_TICK),
        "submissions": len(team.stream_submissions),
        "tasks": len(team.stream_running) + len(team.stream_completed),
        "running": len(team.stream_running),
        "target_ms": LONG_TASK_MS,
        "phases": phases,
        "wrong": wrong,
    }
