"""The main thread of two pages left open on the demo, as a person leaves them: long tasks over minutes.

    python -m bench.demo_watch [--minutes 5] [--speed 5]

Starts `gateway demo --speed 5` on embedded servers in a scratch folder (or on DATABASE_URL/REDIS_URL when set),
signs in as its first member and opens two pages in Debian's Chromium, 1400 x 900: the dashboard with the Jobs
popover open and the pointer resting on its first row, and the Submissions page with the pointer resting on its
fifth row. For `--minutes` the browser's own PerformanceObserver records every long task (over 50 ms) of each
page, with when it started: those before both pages were drawn and the pointer placed are the pages' loading
(`load`: evaluating the modules, the first snapshot), reported apart; the figure is the tasks while the pages
stream, what a person who leaves them open meets. Chromium's long animation frames say what each long task did
(`frames`, the load's in `load`: its rendering, style and layout, and the scripts over 5 ms it ran with their
invoker, e.g. `DOMWebSocket.onmessage`, `FrameRequestCallback`; none listed and little rendering: the thread
waited). The
figures are the machine's: run it on a quiet machine, and read them beside the same run of the commit before
(docs/performance.md says which). Writes bench/results/<date>-demo-watch/<commit>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gateway.embedded import free_port
from harness.browser import ARGS, chromium_path
from harness.world import spawn, wait_http

from .views.common import LONG_TASK_MS

ROOT = Path(__file__).resolve().parents[1]
# Every long task with its start; and the long animation frames holding one (blockingDuration > 0), with the
# scripts over 5 ms they ran: where a task's time went. Buffered, so the load's are kept and told apart by start.
WATCH = """
window.bench = { tasks: [], frames: [] };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.bench.tasks.push({ start: e.startTime, ms: e.duration });
}).observe({ type: 'longtask', buffered: true });
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (!(e.blockingDuration > 0)) continue;
      const end = e.startTime + e.duration; // the frame's rendering, and of it the style and layout
      window.bench.frames.push({ start: e.startTime, ms: e.duration,
        render_ms: Math.round(e.renderStart ? end - e.renderStart : 0),
        style_layout_ms: Math.round(e.styleAndLayoutStart ? end - e.styleAndLayoutStart : 0),
        scripts: e.scripts.map((s) => ({
        invoker: s.invoker, type: s.invokerType, ms: Math.round(s.duration),
        source: `${(s.sourceURL || '').split('/').pop()}:${s.sourceFunctionName || ''}`,
        layout_ms: Math.round(s.forcedStyleAndLayoutDuration) })) });
    }
  }).observe({ type: 'long-animation-frame', buffered: true });
} catch (e) { /* a Chromium without long animation frames: the tasks alone */ }
"""


def tasks_of(tasks: list[dict[str, Any]], observed_s: float) -> dict[str, Any]:
    """What a list of long tasks sums to."""
    durations = sorted((t["ms"] for t in tasks), reverse=True)
    return {
        "long_tasks": len(durations),
        "over_target": sum(1 for d in durations if d > LONG_TASK_MS),
        "max_ms": round(durations[0], 1) if durations else 0.0,
        "longest_ms": [round(d, 1) for d in durations[:10]],
        "busy_share": round(sum(durations) / (observed_s * 1000), 4) if observed_s else 0.0,
    }


def split(seen: dict[str, Any], settled_ms: float, observed_s: float) -> dict[str, Any]:
    """A page's long tasks, those of its loading apart from those while it streams (by when each started), with
    the scripts of the long animation frames holding the streaming ones."""
    load = [t for t in seen["tasks"] if t["start"] < settled_ms]
    streaming = [t for t in seen["tasks"] if t["start"] >= settled_ms]
    by_length = sorted(seen["frames"], key=lambda f: -f["ms"])

    def frames(loading: bool) -> list[dict[str, Any]]:  # at_s: from the page settled (negative: while loading)
        return [
            {k: f[k] for k in ("render_ms", "style_layout_ms", "scripts")}
            | {"ms": round(f["ms"]), "at_s": round((f["start"] - settled_ms) / 1000, 1)}
            for f in by_length
            if (f["start"] < settled_ms) == loading
        ][:10]

    return {
        **tasks_of(streaming, observed_s),
        "load": {**tasks_of(load, 0.0), "settled_ms": round(settled_ms), "frames": frames(loading=True)},
        "at_s": [round((t["start"] - settled_ms) / 1000, 1) for t in sorted(streaming, key=lambda t: -t["ms"])[:10]],
        "frames": frames(loading=False),
    }


async def watch(base: str, minutes: float) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium_path(), args=ARGS)
        try:
            pages = {}
            for name in ("popover", "submissions"):
                context = await browser.new_context(viewport={"width": 1400, "height": 900}, bypass_csp=True)
                await context.add_init_script(WATCH)
                users = await (await context.request.get(f"{base}/api/sign-in/users")).json()
                first = users["users"][0]["id"]
                await context.request.post(f"{base}/api/sign-in", data={"user_id": first})
                page = await context.new_page()
                if name == "popover":
                    await page.goto(f"{base}/")
                    # The ring answers a click once the app has started (app.js wires it after its first reads).
                    await page.wait_for_function("window.gatewayLive && document.body.dataset.live === 'live'")
                    await page.click("#ring")
                    row = page.locator("#popover [data-head]").first
                else:
                    await page.goto(f"{base}/submissions")
                    row = page.locator("tbody tr[data-sub]").nth(4)
                await row.wait_for(timeout=120_000)
                box = await row.bounding_box()
                assert box is not None, f"the {name} page's row is not drawn"
                await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
                pages[name] = page
            # Both pages drawn, the pointer resting: from here on they are left open. Marked on each page's own
            # clock; a task starting before it was loading (the other page's loading competed for the cores too).
            settled = {name: await page.evaluate("performance.now()") for name, page in pages.items()}
            started = time.monotonic()
            await asyncio.sleep(minutes * 60)
            observed = time.monotonic() - started
            found = {}
            for name, page in pages.items():
                found[name] = split(await page.evaluate("window.bench"), settled[name], observed)
            return {"observed_s": round(observed, 1), "pages": found}
        finally:
            await browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.demo_watch", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--speed", type=float, default=5.0)
    args = parser.parse_args()
    if chromium_path() is None:
        raise SystemExit("needs Debian's Chromium (apt-get install chromium)")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    with tempfile.TemporaryDirectory(prefix="demo-watch-") as scratch:
        port = free_port()
        env = {**os.environ, "GATEWAY_LOG_LEVEL": "WARNING"}
        demo = spawn(
            "demo",
            ["demo", "--port", str(port), "--speed", str(args.speed), "--data", f"{scratch}/data"],
            env,
            Path(scratch),
            port,
        )
        try:
            wait_http(demo)
            result = asyncio.run(watch(f"http://127.0.0.1:{port}", args.minutes))
        finally:
            demo.proc.terminate()
            demo.proc.wait(timeout=60)
    result.update(
        commit=commit.stdout.strip(),
        minutes=args.minutes,
        speed=args.speed,
        target_ms=LONG_TASK_MS,
        cpus=os.cpu_count(),
        load=os.getloadavg(),
    )
    folder = ROOT / "bench" / "results" / f"{datetime.date.today()}-demo-watch"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{result['commit']}.json").write_text(json.dumps(result, indent=2) + "\n")
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
