"""The main thread of two pages left open on the demo, as a person leaves them: long tasks over minutes.

    python -m bench.demo_watch [--minutes 5] [--speed 5]

Starts `gateway demo --speed 5` on embedded servers in a scratch folder (or on DATABASE_URL/REDIS_URL when set),
signs in as its first member and opens two pages in Debian's Chromium, 1400 x 900: the dashboard with the Jobs
popover open and the pointer resting on its first row, and the Submissions page with the pointer resting on its
fifth row. For `--minutes` the browser's own PerformanceObserver records every long task (over 50 ms) of each
page. The figures are the machine's: run it on a quiet machine, and read them beside the same run of the commit
before (docs/performance.md says which). Writes bench/results/<date>-demo-watch/<commit>.json.
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
WATCH = """
window.benchLongTasks = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) window.benchLongTasks.push(e.duration);
}).observe({ type: 'longtask', buffered: true });
"""


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
                    await page.click("#ring")
                    row = page.locator("#popover [data-head]").first
                else:
                    await page.goto(f"{base}/submissions")
                    row = page.locator("tbody tr[data-sub]").nth(4)
                await row.wait_for(timeout=120_000)
                box = await row.bounding_box()
                assert box is not None, f"the {name} page's row is not drawn"
                await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
                await page.evaluate("window.benchLongTasks.length = 0")  # what loading cost is not the question
                pages[name] = page
            started = time.monotonic()
            await asyncio.sleep(minutes * 60)
            observed = time.monotonic() - started
            found = {}
            for name, page in pages.items():
                tasks = sorted(await page.evaluate("window.benchLongTasks"), reverse=True)
                found[name] = {
                    "long_tasks": len(tasks),
                    "over_target": sum(1 for d in tasks if d > LONG_TASK_MS),
                    "max_ms": round(tasks[0], 1) if tasks else 0.0,
                    "longest_ms": [round(d, 1) for d in tasks[:10]],
                    "busy_share": round(sum(tasks) / (observed * 1000), 4),
                }
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
