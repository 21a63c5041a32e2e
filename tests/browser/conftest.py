"""Real Chromium (Debian's, at /usr/bin/chromium) driven by Playwright against gateway processes.

Without Chromium these tests are skipped, unless GATEWAY_REQUIRE_BROWSER=1 (CI sets it) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator

import pytest

from tests.integration.conftest import pool, team  # noqa: F401  (the same fixtures as the integration tests)

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def _chromium() -> str | None:
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    return shutil.which("chromium")


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[object]:
    path = _chromium()
    if path is None:
        if os.environ.get("GATEWAY_REQUIRE_BROWSER") == "1":
            pytest.fail("Chromium is required (GATEWAY_REQUIRE_BROWSER=1) but /usr/bin/chromium is missing")
        pytest.skip("Chromium is not installed (apt-get install chromium); browser tests not run")
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=path, args=ARGS)
        yield b
        await b.close()
