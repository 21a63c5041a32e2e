"""README's screenshots, made from a seeded demo in Debian's Chromium, with the hash of the frontend they show.

    python -m tools.screenshots [--out docs/screenshots]

It starts `gateway demo --seed 1 --speed 5` on a free port with a fresh data folder (embedded PostgreSQL and
Valkey), signs in through the link the demo prints, waits until the simulated clusters have work running and a
finished trajectory's analyses are listed, and writes popover.png, panel.png, analyses.png and submissions.png at
1400 x 900 and narrow.png at 360 x 740. docs/screenshots/SOURCE records the sha256 of the served frontend files
(frontend/ without its tests/ and vectors/); tests/unit/test_screenshots.py compares it with the frontend of the
checkout, so a change to frontend/ asks for this command again. Every step waits for a condition on the page,
never for a fixed time; the clusters' random choices are seeded, but the moment of each picture is not, so two
runs differ in counts and times, never in what each picture shows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FRONTEND = ROOT / "frontend"
OUT = ROOT / "docs" / "screenshots"
SOURCE = "SOURCE"
COMMAND = "python -m tools.screenshots"
NOT_SERVED = ("tests", "vectors")  # frontend/'s own tests and the shared vectors: not in the pages (pyproject.toml)
WIDE = {"width": 1400, "height": 900}
NARROW = {"width": 360, "height": 740}
WAIT_MS = 120_000  # a busy 2-core machine: the demo's first minutes at speed 5
CLICK_MS = 10_000  # a card that does not take a click in this long has moved away
ENOUGH_ANALYSES = 3  # a listing worth a picture: a pipeline run of several analyses
GOOD_ENOUGH_S = 60  # after this long, any trajectory listing one will do


def frontend_files(root: Path = FRONTEND) -> list[Path]:
    """The files the pages are made of, in a stable order."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] not in NOT_SERVED and "__pycache__" not in p.parts
    )


def frontend_hash(root: Path = FRONTEND) -> str:
    """sha256 over every served file's path (relative to frontend/) and bytes."""
    digest = hashlib.sha256()
    for path in frontend_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def source_text(hashed: str) -> str:
    return (
        f"frontend sha256 {hashed}\n"
        f"made by `{COMMAND}` from `gateway demo --seed 1 --speed 5`; tests/unit/test_screenshots.py compares it\n"
    )


def recorded_hash(out: Path = OUT) -> str | None:
    path = out / SOURCE
    if not path.is_file():
        return None
    found = re.search(r"^frontend sha256 ([0-9a-f]{64})$", path.read_text(), re.M)
    return found.group(1) if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def demo(data: Path) -> AsyncIterator[str]:
    """`gateway demo` in a process of its own; yields the sign-in link it prints, and stops it with SIGINT (its
    Ctrl-C: the producer, the web server and relay, then the embedded servers)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "GATEWAY_SECRET")}
    port = _free_port()
    argv = [sys.executable, "-m", "gateway", "demo", "--port", str(port), "--data", str(data)]
    process = await asyncio.create_subprocess_exec(
        *argv, "--seed", "1", "--speed", "5", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert process.stdout is not None
    seen: list[str] = []
    drain: asyncio.Task[bytes] | None = None
    try:
        async with asyncio.timeout(WAIT_MS / 1000):
            while True:
                line = (await process.stdout.readline()).decode()
                if not line:
                    raise RuntimeError("the demo ended before printing its link:\n" + "".join(seen[-30:]))
                seen.append(line)
                if line.strip().startswith("open "):
                    break
        drain = asyncio.create_task(process.stdout.read())  # its later output must not fill the pipe
        yield line.split()[1]
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(process.wait(), 60)
            except TimeoutError:
                process.kill()
                await process.wait()
        if drain is not None:
            drain.cancel()


async def _signed_in(browser: Any, link: str, viewport: dict[str, int]) -> tuple[Any, Any]:
    # Playwright's polling waits evaluate strings, which the Content-Security-Policy refuses: bypassed, as in the
    # browser tests.
    context = await browser.new_context(viewport=viewport, bypass_csp=True)
    page = await context.new_page()
    base = link.split("/?")[0]
    await page.goto(link)
    async with page.expect_navigation(url=f"{base}/"):
        await page.click("#confirm-sign-in")
    await page.wait_for_function("window.gatewayLive && document.body.dataset.live === 'live'", timeout=WAIT_MS)
    await page.wait_for_selector("#bell")
    return context, page


async def _quiet(page: Any) -> None:
    """No toast over the picture (the bell keeps them) nor a finished card's passing glow, and the pointer rests
    off the page."""
    await page.evaluate("""() => {
        document.querySelectorAll('#toasts .toast').forEach((t) => t.remove());
        document.querySelectorAll('.glow').forEach((e) => e.classList.remove('glow'));
    }""")
    await page.mouse.move(0, 0)


async def _shoot(page: Any, path: Path) -> None:
    await _quiet(page)
    await page.screenshot(path=str(path))
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}", flush=True)


ANALYSES_SHOWN = (
    "() => !!document.querySelector('#panel tr[data-analysis]')"
    " || /No analyses/.test(document.getElementById('panel-analyses')?.textContent || '')"
)


async def _analysed(page: Any) -> str:
    """A trajectory whose analyses are listed (a pipeline run the simulated clusters started), its panel open on
    the Analyses tab: each pass tries every card and keeps the one listing the most; one listing ENOUGH_ANALYSES,
    or after GOOD_ENOUGH_S any that lists one, will do."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    while loop.time() < started + WAIT_MS / 1000:
        news = page.locator(".cards-bar .news")
        if await news.count() and await news.is_visible():
            await news.click()
        listed: dict[str, int] = {}
        for card in [await c.get_attribute("data-card") for c in await page.locator("[data-card]:visible").all()]:
            if await _panel(page, str(card)):
                listed[str(card)] = await page.locator("#panel tr[data-analysis]").count()
                await page.click("#panel-close")
        best = max(listed, key=lambda c: listed[c], default=None)
        if (
            best is not None
            and (listed[best] >= ENOUGH_ANALYSES or listed[best] and loop.time() > started + GOOD_ENOUGH_S)
            and await _panel(page, best)
        ):
            return best
        await page.wait_for_function(  # the next change of the ring before the next pass, or 10 s of none
            "([t, until]) => document.getElementById('ring-label').textContent !== t || Date.now() > until",
            arg=[await page.locator("#ring-label").text_content(), await page.evaluate("Date.now() + 10000")],
            timeout=WAIT_MS,
        )
    raise TimeoutError("no trajectory with analyses appeared")


async def _panel(page: Any, card: str) -> bool:
    """The card's panel, open on its Analyses tab once they are listed (or said to be none). False when the card
    moved away meanwhile (a finished one folds after its glow): the menu or panel it opened is closed again."""
    from playwright.async_api import Error

    try:
        await page.click(f"[data-menu='{card}']", timeout=CLICK_MS)
        await page.click(".menu li:text-is('Compute jobs')", timeout=CLICK_MS)
        await page.wait_for_selector("#panel:not([hidden])", timeout=CLICK_MS)
        await page.click("#tab-analyses", timeout=CLICK_MS)
        await page.wait_for_function(ANALYSES_SHOWN, timeout=WAIT_MS)
        return True
    except Error:
        await page.keyboard.press("Escape")
        if await page.locator("#panel:not([hidden])").count():
            await page.click("#panel-close")
        return False


async def take(link: str, out: Path) -> None:
    from playwright.async_api import async_playwright

    from harness.browser import ARGS, chromium_path, open_groups

    chromium = chromium_path()
    if chromium is None:
        raise SystemExit("Chromium is required (apt-get install chromium)")
    base = link.split("/?")[0]
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            context, page = await _signed_in(browser, link, WIDE)
            # The demo at work: jobs running, and a trajectory whose analyses are listed with their time left.
            await page.wait_for_function(
                "/running/.test(document.getElementById('ring-label').textContent)", timeout=WAIT_MS
            )
            await page.wait_for_selector("[data-card]", timeout=WAIT_MS)
            await page.click("#ring")
            head = page.locator("#popover [data-head]").first
            await head.wait_for(timeout=WAIT_MS)
            await head.click()
            await page.locator("#popover [data-group], #popover .row.job").first.wait_for(timeout=WAIT_MS)
            await _shoot(page, out / "popover.png")
            await page.keyboard.press("Escape")

            await _analysed(page)
            await page.click("#tab-jobs")
            await open_groups(page, "#panel", 1)
            await page.locator("#panel .row.job").first.wait_for(timeout=WAIT_MS)
            await _shoot(page, out / "panel.png")

            await page.click("#tab-analyses")
            await _shoot(page, out / "analyses.png")
            await page.click("#panel-close")

            await page.goto(f"{base}/submissions")
            await page.wait_for_selector("tr[data-sub]", timeout=WAIT_MS)
            await page.wait_for_selector(".export")
            await page.click("tr[data-sub]", button="right")
            await page.wait_for_selector(".menu")
            await _shoot(page, out / "submissions.png")
            await context.close()

            context, page = await _signed_in(browser, link, NARROW)
            await page.wait_for_selector("[data-card]", timeout=WAIT_MS)
            await page.click("#ring")
            await page.locator("#popover [data-head]").first.wait_for(timeout=WAIT_MS)
            await _shoot(page, out / "narrow.png")
            await context.close()
        except Exception:
            for c in browser.contexts:  # what the page showed when a wait gave up
                for shown in c.pages:
                    await shown.screenshot(path=str(Path(tempfile.gettempdir()) / "screenshots-failed.png"))
            raise
        finally:
            await browser.close()


async def make(out: Path) -> None:
    hashed = frontend_hash()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="screenshots-") as data:
        async with demo(Path(data)) as link:
            await take(link, out)
    if frontend_hash() != hashed:
        raise SystemExit("frontend/ changed while the screenshots were made: run it again")
    (out / SOURCE).write_text(source_text(hashed))
    print(f"wrote {(out / SOURCE).relative_to(ROOT) if out.is_relative_to(ROOT) else out / SOURCE}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=OUT, help="folder to write to (default: %(default)s)")
    args = parser.parse_args(argv)
    asyncio.run(make(args.out.resolve()))


if __name__ == "__main__":
    main()
