"""Chromium offers permessage-deflate on every websocket: the node accepts it without context takeover, and the
app renders exactly what it renders from a node that does not compress (GATEWAY_COMPRESSION=0)."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from gateway.embedded import free_port
from tests.browser.helpers import sign_in
from tests.conftest import Process, Stack, spawn, wait_http
from tests.integration.conftest import Team, insert_jobs


@pytest.fixture
async def plain_node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Process]:
    """A node of the same stack with compression turned off."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_COMPRESSION": "0",
    }
    node = spawn("node-plain", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("plain"), port)
    try:
        await asyncio.to_thread(wait_http, node)
        yield node
    finally:
        node.stop()


async def open_app(browser: Any, base: str, token: str) -> tuple[Any, Any, list[dict[str, str]]]:
    """A signed-in page, and the response headers of its websocket handshakes (from the DevTools protocol)."""
    context = await browser.new_context(viewport={"width": 1200, "height": 800}, bypass_csp=True)
    page = await context.new_page()
    handshakes: list[dict[str, str]] = []
    cdp = await context.new_cdp_session(page)
    await cdp.send("Network.enable")
    cdp.on(
        "Network.webSocketHandshakeResponseReceived",
        lambda event: handshakes.append({k.lower(): v for k, v in event["response"]["headers"].items()}),
    )
    await sign_in(page, base, token)
    await page.wait_for_function("window.gatewayLive && document.body.dataset.live === 'live'")
    return context, page, handshakes


ROWS = "els => els.map(e => [e.dataset.KEY, e.className, e.innerText].join('|')).join('\\n')"  # each row, one line


async def shown(page: Any, trajectory: int) -> dict[str, Any]:
    """What a person sees: the ring, the popover's counts, and the trajectory's jobs panel."""
    await page.click("#ring")
    return {
        "ring": await page.inner_text("#ring-label"),
        "counts": await page.inner_text(".counts"),
        "groups": _ageless(await page.eval_on_selector_all("#panel [data-group]", ROWS.replace("KEY", "group"))),
        "jobs": _ageless(await page.eval_on_selector_all("#panel .row.job", ROWS.replace("KEY", "job"))),
        "popover": _ageless(await page.inner_text("#popover")),
        "card": _ageless(await page.inner_text(f"[data-card='{trajectory}']")),
    }


def _ageless(text: str) -> str:
    """Ages are read a moment apart on two pages: "just now" may have become "1s ago" on the second."""
    return re.sub(r"just now|\d+\s*[smhd] ago", "<age>", text)


async def test_a_compressing_browser_renders_what_an_uncompressed_one_does(
    browser: Any, stack: Stack, plain_node: Process, pool: asyncpg.Pool, team: Team
) -> None:
    ids = await insert_jobs(pool, team, 150)  # a snapshot of some 30 KB: compressed, as live batches are
    pages = []
    try:
        for base in (stack.nodes[0].http, plain_node.http):
            context, page, handshakes = await open_app(browser, base, team.token)
            pages.append((context, page, handshakes))
        (_, deflating, compressed_handshakes), (_, plain, plain_handshakes) = pages
        extensions = compressed_handshakes[0].get("sec-websocket-extensions", "")
        assert extensions.startswith("permessage-deflate") and "server_no_context_takeover" in extensions
        assert "sec-websocket-extensions" not in plain_handshakes[0]
        for page in (deflating, plain):
            await page.wait_for_function("document.getElementById('ring-label').textContent === '150 queued'")
            await page.click(f"[data-menu='{team.trajectory_id}']")
            await page.click("text=Compute jobs")
            await page.wait_for_function(f"window.gatewayLive.channels.get('trajectory:{team.trajectory_id}').ready")
        await pool.execute(
            "update jobs set status = 'failed', error = 'segfault' where id = any($1::bigint[])", ids[:10]
        )
        await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids[10:70])
        for page in (deflating, plain):
            await page.wait_for_function("document.getElementById('ring-label').textContent === '60 running'")
            await page.wait_for_function(
                "document.querySelector(\"#panel [data-group='frame:0']\").className.includes('red')"
            )
            await page.click("#panel [data-group='frame:0']")  # its failed job's row, with the error
            await page.wait_for_selector("#panel .row.job.red")
        assert await shown(deflating, team.trajectory_id) == await shown(plain, team.trajectory_id)
    finally:
        for context, _, _ in pages:
            await context.close()
