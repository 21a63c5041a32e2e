"""Debian's Chromium as the browser tests, the benchmark's views and tools/screenshots drive it (Playwright, no
downloaded browser), with the steps they share: signing in, opening a tree's groups."""

from __future__ import annotations

import os
import shutil
from typing import Any

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")

# Without the background-networking flags Chromium's calls home are refused by a closed network, many at a time.
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    """Where Chromium is (CHROMIUM, else on the PATH), or None."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    return shutil.which("chromium")


async def sign_in(page: Any, base: str, token: str) -> None:
    """A sign-in link asks first: confirm as the person would. The confirmation page's address is `/` already
    (the token leaves it at once), so what tells that the person is in is the page the button leads to."""
    await page.goto(f"{base}/?token={token}")
    async with page.expect_navigation(url=f"{base}/"):
        await page.click("#confirm-sign-in")


async def open_groups(page: Any, scope: str, count: int) -> None:
    """Open the frame groups of a tree (only groups holding storage transfers open by themselves), `count` of them."""
    await page.locator(f"{scope} [data-group]").nth(count - 1).wait_for()  # a locator: pages under the CSP too
    for _ in range(count):
        closed = page.locator(f"{scope} [data-group][aria-expanded='false']")
        if not await closed.count():
            break
        await closed.first.click()
