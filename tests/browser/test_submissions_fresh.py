"""A newer row wins on the Submissions page, in Chromium: a window read that finds an older copy of a row than the
one the team channel streamed keeps the streamed one (issue #50, "what a person sees is true").

The race itself (the channel streams a row just before the page's read begins, the read finds the copy saved
before it) cannot be timed from outside, and today's relay saves a row before it publishes it
(gateway.core.publish_cycle); its outcome can be made: PostgreSQL is given back the row's older saved copy after
the page saw the newer one streamed, and the page then reads its window again."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

import asyncpg

from tests.browser.test_submissions_lifecycle import submission
from tests.conftest import Stack
from tests.integration.conftest import Team

SHOWN = "() => [...document.querySelectorAll('tbody tr[data-sub]')].map(e => Number(e.dataset.sub)).join()"


def cell(sid: int, col: str) -> str:
    return f'document.querySelector(\'tr[data-sub="{sid}"] td[data-col="{col}"]\')?.textContent'


async def saved_row(pool: asyncpg.Pool, sid: int, priority: int) -> str:
    """The row's saved JSON once the relay saved it with `priority`."""
    deadline = time.monotonic() + 60
    while True:
        text = await pool.fetchval(
            "select s.row from submission_rows s where s.id = $1 and (s.row::jsonb ->> 'priority')::int = $2",
            sid,
            priority,
        )
        if text is not None:
            return str(text)
        assert time.monotonic() < deadline, f"the relay did not save submission {sid} at priority {priority} in 60 s"
        await asyncio.sleep(0.05)


async def test_a_window_read_that_finds_an_older_copy_keeps_the_newer_streamed_row(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    a = await submission(pool, team, "Render A")
    b = await submission(pool, team, "Render B")
    older = await saved_row(pool, b, 0)
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.wait_for_function(f"({SHOWN})() === '{b},{a}'")  # newest first
    assert await page.evaluate(cell(b, "priority")) == "0"

    await pool.execute("update submissions set priority = 7 where id = $1", b)
    await page.wait_for_function(f"{cell(b, 'priority')} === '7'")  # streamed
    await saved_row(pool, b, 7)
    # What a read sees when the channel was faster than the save: the older copy.
    await pool.execute("update submission_rows set row = $2, priority = 0 where id = $1", b, older)

    await page.click("button[data-sort='id']")  # the window is read again (JOB ID, ascending)
    await page.wait_for_function(f"({SHOWN})() === '{a},{b}' && !document.querySelector('table[aria-busy]')")
    assert await page.evaluate(cell(b, "priority")) == "7"
    # The next read, the person's own (back to CREATED), still shows it.
    await page.click("button[data-sort='created_at']")
    await page.wait_for_function(f"({SHOWN})() === '{b},{a}' && !document.querySelector('table[aria-busy]')")
    assert await page.evaluate(cell(b, "priority")) == "7"


async def late_reads(page: Any) -> tuple[asyncio.Event, asyncio.Event]:
    """The page's window reads answered late: the server's own answer, held until the test lets it go."""
    read, released = asyncio.Event(), asyncio.Event()

    async def late_window(route: Any) -> None:
        response = await route.fetch()
        read.set()
        await released.wait()
        await route.fulfill(response=response)

    await page.route("**/api/teams/*/submissions?*", late_window)
    return read, released


async def test_a_submission_made_while_the_window_was_read_shows(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """A submission that streamed in while the window was on its way, after the read had found the rows, was
    announced and then forgotten when the read's answer came: it never showed."""
    a = await submission(pool, team, "Render A")
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.wait_for_function(f"({SHOWN})() === '{a}' && !document.querySelector('table[aria-busy]')")
    read, released = await late_reads(page)
    await page.click("button[data-sort='created_at']")  # oldest first: the person's own read
    await page.mouse.move(5, 5)  # off the table: a pointer resting on it holds the order (a new row is announced)
    await read.wait()
    await page.evaluate(
        "() => { window.heard = []; gatewayApp.team.onSubmissions((rows) => heard.push(...rows.map((r) => r.id))); }"
    )
    b = await submission(pool, team, "Render B")
    await page.wait_for_function(f"heard.includes({b})")  # streamed while the read was on its way
    released.set()
    await page.wait_for_function(f"({SHOWN})() === '{a},{b}'", timeout=30_000)


async def test_a_change_missed_while_the_channel_started_again_during_a_read_shows(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """The page's first read and its team channel's start race: a row's change published after the read found the
    row and before the channel started was heard by neither, and the channel's snapshot, which asks the page to
    read its window again, came while that read was on its way and was forgotten with it. The row kept its first
    words for good (a whole suite in CI: a submission read as created never showed its 22 tasks)."""
    a = await submission(pool, team, "Render A")
    older = await saved_row(pool, a, 0)
    await page.goto(f"{stack.nodes[0].http}/submissions")
    await page.wait_for_function(f"({SHOWN})() === '{a}' && !document.querySelector('table[aria-busy]')")
    read, released = await late_reads(page)
    await page.click("button[data-sort='created_at']")
    await page.mouse.move(5, 5)
    await read.wait()  # the read found the row at priority 0
    # The change the page missed: saved (as the relay saves before it publishes), its publication unheard.
    newer = json.loads(older) | {"priority": 7, "updated_at": datetime.now(UTC).isoformat()}
    await pool.execute("update submission_rows set row = $2, priority = 7 where id = $1", a, json.dumps(newer))
    # The channel starts again as it does after lost messages: a fresh subscription and its snapshot.
    await page.evaluate(f"(live => live._reload('team:{team.id}', live.channels.get('team:{team.id}')))(gatewayLive)")
    await page.wait_for_function(f"gatewayLive.channels.get('team:{team.id}').ready")
    released.set()
    await page.wait_for_function(f"{cell(a, 'priority')} === '7'", timeout=30_000)


async def test_a_row_that_moved_while_the_window_was_read_takes_its_place(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """A row's newer copy that streamed in while the window was on its way replaced the read's copy in the read's
    place, not in its own: sorted by priority, a submission raised to the top during the read stayed second (a
    whole suite: the window never caught up with the server's once the changes stopped)."""
    a = await submission(pool, team, "Render A")
    b = await submission(pool, team, "Render B")
    await page.goto(f"{stack.nodes[0].http}/submissions?sort=priority")
    await page.wait_for_function(f"({SHOWN})() === '{a},{b}' && !document.querySelector('table[aria-busy]')")
    read, released = await late_reads(page)
    await page.click("button[data-sort='priority']")  # highest first: the tie goes to the newest, B
    await page.mouse.move(5, 5)
    await read.wait()  # the read found B, A, both at priority 0
    await page.evaluate(
        "() => { window.heard = []; gatewayApp.team.onSubmissions((rows) => heard.push(...rows.map((r) => r.id))); }"
    )
    await pool.execute("update submissions set priority = 7 where id = $1", a)
    await page.wait_for_function(f"heard.includes({a})")  # streamed while the read was on its way
    released.set()
    await page.wait_for_function(f"({SHOWN})() === '{b},{a}'")  # the read's order, A's newer words in it
    await page.wait_for_function(f"({SHOWN})() === '{a},{b}' && {cell(a, 'priority')} === '7'", timeout=30_000)
