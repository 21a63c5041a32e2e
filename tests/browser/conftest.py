"""Real Chromium (Debian's, at /usr/bin/chromium) driven by Playwright against gateway processes.

Without Chromium these tests are skipped, unless GATEWAY_REQUIRE_BROWSER=1 (CI sets it) makes that a failure.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from harness.browser import ARGS, chromium_path, sign_in  # noqa: F401  (tests import them from here too)
from tests.conftest import Stack
from tests.integration.conftest import Team, pool, team  # noqa: F401  (the same fixtures as the integration tests)


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[object]:
    path = chromium_path()
    if path is None:
        if os.environ.get("GATEWAY_REQUIRE_BROWSER") == "1":
            pytest.fail("Chromium is required (GATEWAY_REQUIRE_BROWSER=1) but /usr/bin/chromium is missing")
        pytest.skip("Chromium is not installed (apt-get install chromium); browser tests not run")
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=path, args=ARGS)
        yield b
        await b.close()


@pytest.fixture
async def page(browser: Any, stack: Stack, team: Team) -> AsyncIterator[Any]:  # noqa: F811  (a pytest fixture)
    """A signed-in page, 1200 x 800, live. Playwright's polling waits evaluate strings, which the
    Content-Security-Policy refuses (no 'unsafe-eval'): these tests bypass it,
    test_the_app_runs_under_its_content_security_policy does not. A page error fails the test."""
    context = await browser.new_context(viewport={"width": 1200, "height": 800}, bypass_csp=True)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    await sign_in(page, stack.nodes[0].http, team.token)
    await page.wait_for_function("window.gatewayLive && document.body.dataset.live === 'live'")
    yield page
    # A test that answers reads itself (page.route) may hold one still on its way: it dies with the page.
    await page.unroute_all(behavior="ignoreErrors")
    await context.close()
    assert errors == []
