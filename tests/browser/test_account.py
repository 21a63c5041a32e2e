"""Signing out and the account page in real Chromium: Sign out on every page ends the session (the old cookie gets
401), the account page lists the teams with a role each and the sessions with their device and last seen, and a
session revoked from one browser signs the other browser out."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx

from gateway.web.people.auth import issue_token
from tests.browser.helpers import axe_violations, layout_problems, sign_in
from tests.conftest import Process, Stack
from tests.integration.conftest import Team

FIREFOX = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:127.0) Gecko/20100101 Firefox/127.0"


async def old_cookie_refused(stack: Stack, token: str) -> None:
    for node in stack.nodes:
        async with httpx.AsyncClient(base_url=node.http, cookies={"gateway_token": token}) as old:
            answer = await old.get("/api/me")
        assert (answer.status_code, answer.json()["message"]) == (401, "token revoked")


async def test_sign_out_is_on_every_page_by_keyboard_and_the_old_cookie_no_longer_works(
    page: Any, stack: Stack, team: Team
) -> None:
    base = stack.nodes[0].http
    for where in ("/", "/submissions", "/#/team", "/#/account"):
        await page.goto(f"{base}{where}")
        await page.get_by_role("button", name="Sign out").wait_for()
        await page.get_by_role("link", name="Account").wait_for()
    # What the pages keep in the browser for this person (the bell's list of toasts, trajectories opened today).
    await page.evaluate("localStorage.setItem(`jobs.toasts.${1}`, '[]'); localStorage.setItem('jobs.mine.1', '{}')")
    assert "jobs.mine.1" in await page.evaluate("Object.keys(localStorage)")
    await page.focus("#ring")
    await page.keyboard.press("Tab")  # the Jobs ring, its bell of notifications, then Sign out
    assert await page.evaluate("document.activeElement.id") == "bell"
    await page.keyboard.press("Tab")
    assert await page.evaluate("document.activeElement.textContent") == "Sign out"
    await page.keyboard.press("Enter")
    await page.wait_for_url(f"{base}/?signin=out")
    await page.locator("main h1", has_text="Sign in").wait_for()
    assert "You have signed out." in await page.inner_text("main")
    assert await page.locator("#sign-out").is_hidden()
    assert await page.context.cookies() == []
    assert [k for k in await page.evaluate("Object.keys(localStorage)") if k.startswith("jobs.")] == []
    await old_cookie_refused(stack, team.token)


async def test_sign_out_clicked_before_the_app_connects_signs_out_and_never_connects(
    page: Any, stack: Stack, team: Team
) -> None:
    """Sign out clicked while the app still read the team's members (a busy machine, a slow network) landed on
    "Your session has ended" (CI, 2026-12-07): the app connected afterwards with the revoked cookie, was refused,
    and its refused renewal sent the person to that page instead."""
    base = stack.nodes[0].http
    held: list[Any] = []
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    await page.route("**/api/teams/*/members", lambda route: held.append(route))  # answered after the click
    await page.goto(f"{base}/")
    await page.get_by_role("button", name="Sign out").wait_for()
    await page.get_by_role("button", name="Sign out").click()
    for route in held:
        await route.continue_()
    await page.wait_for_url(f"{base}/?signin=out")
    await page.locator("main [role=status]", has_text="You have signed out.").wait_for()
    assert sockets == []
    await old_cookie_refused(stack, team.token)


async def test_the_account_page_lists_teams_with_their_role_and_sessions_with_device_and_last_seen(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    lab = await pool.fetchval("insert into teams (name) values ('Crystal Lab') returning id")
    await pool.execute("insert into memberships (team_id, user_id, role) values ($1, $2, 'admin')", lab, team.user_id)
    laptop = issue_token(stack.secret, team.user_id, 3600)
    async with httpx.AsyncClient(base_url=stack.nodes[1].http, headers={"User-Agent": FIREFOX}) as other:
        assert (await other.get("/api/account", headers={"Authorization": f"Bearer {laptop}"})).status_code == 200
    await page.get_by_role("link", name="Account").click()
    await page.wait_for_url("**/#/account")
    await page.locator("main h1", has_text="Account").wait_for()
    assert await page.get_attribute("#nav-account", "aria-current") == "page"
    await page.locator("table.account-sessions tr[data-session]").nth(1).wait_for()
    teams = await page.eval_on_selector_all(
        "table.account-teams tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText))"
    )
    team_name = await pool.fetchval("select name from teams where id = $1", team.id)
    assert sorted(teams) == sorted([["Crystal Lab", "Admin"], [team_name, "Member"]])
    rows = await page.eval_on_selector_all(
        "table.account-sessions tbody tr",
        "rows => rows.map(r => [r.querySelector('.device').innerText, r.hasAttribute('data-current'),"
        " r.querySelector('.seen').innerText, r.querySelector('button').getAttribute('aria-label')])",
    )
    here, there = rows
    assert here[:3] == ["Chrome on Linux", True, "now"] and "This device" in await page.inner_text("tr[data-current]")
    assert there[:2] == ["Firefox on Windows", False]
    assert there[2] == "just now" or there[2].endswith("s ago"), there
    assert here[3] == "Revoke Chrome on Linux (this device): sign out here" and there[3] == "Revoke Firefox on Windows"
    assert await axe_violations(page) == []
    assert await layout_problems(page, "header, main") == []
    await page.set_viewport_size({"width": 360, "height": 740})
    assert await layout_problems(page, "header, main") == []
    # At 360 px every Revoke button is in view, not scrolled away in its table.
    assert await page.evaluate(
        "[...document.querySelectorAll('button.revoke')].every(b => b.getBoundingClientRect().right <= innerWidth)"
    )


async def test_revoking_a_session_signs_that_browser_out_and_this_one_stays(
    browser: Any, page: Any, stack: Stack, team: Team
) -> None:
    other = await browser.new_context(viewport={"width": 1200, "height": 800}, bypass_csp=True)
    try:
        elsewhere = await other.new_page()
        second = issue_token(stack.secret, team.user_id, 3600)
        await sign_in(elsewhere, stack.nodes[1].http, second)
        await elsewhere.wait_for_selector("body[data-live='live']")
        await page.goto(f"{stack.nodes[0].http}/#/account")
        revoke = page.locator("table.account-sessions tr[data-session]:not([data-current]) button")
        await revoke.wait_for()
        await revoke.click()
        await page.locator(".toast", has_text="Signed out Chrome on Linux").wait_for()
        # Its socket closed (4001), its renewal is refused: the other browser is on the sign-in page.
        await elsewhere.wait_for_url(f"{stack.nodes[1].http}/?signin=ended", timeout=15000)
        await elsewhere.locator("main", has_text="Your session has ended: sign in again.").wait_for()
        await old_cookie_refused(stack, second)
        await page.wait_for_function(
            "document.querySelectorAll('table.account-sessions tr[data-session]').length === 1"
        )
        assert await page.evaluate("document.activeElement.id") == "sessions-title"  # focus stays on the list
        assert await page.evaluate("document.body.dataset.live") == "live"  # this browser is still signed in
    finally:
        await other.close()


async def test_revoking_this_device_signs_this_browser_out(page: Any, stack: Stack, team: Team) -> None:
    base = stack.nodes[0].http
    await page.goto(f"{base}/#/account")
    await page.get_by_role("button", name="Revoke Chrome on Linux (this device): sign out here").click()
    await page.wait_for_url(f"{base}/?signin=out")
    await page.locator("main", has_text="You have signed out.").wait_for()
    await old_cookie_refused(stack, team.token)


async def test_signing_out_of_the_demo_says_so_on_a_page_styled_as_the_app_and_the_picker_says_whose_it_is(
    browser: Any, team: Team, demo_node: Process
) -> None:
    """Sign-out landed on "Who are you?" with every member as a grey button and no word of what happened, under a
    half-drawn header (an empty team select, an idle ring, live links); anyone could pick the owner without the page
    saying this is the demo's picker."""
    node = demo_node  # a node in demo mode, beside the stack's
    for width in (1400, 360):
        context = await browser.new_context(viewport={"width": width, "height": 800}, bypass_csp=True)
        page = await context.new_page()
        await page.goto(f"{node.http}/")
        await page.locator("main h1", has_text="Sign in to the demo").wait_for()
        assert "the demo's picker" in await page.inner_text("main")
        await page.locator(f".picker [data-user='{team.user_id}']").click()
        await page.locator("#ring").wait_for()  # signed in: the header of the app, as the person sees it first
        if width == 360:  # Sign out is behind the header's menu button there
            await page.click("#nav-toggle")
        await page.get_by_role("button", name="Sign out").click()
        await page.wait_for_url(f"{node.http}/?signin=out")
        await page.locator("main h1", has_text="Sign in to the demo").wait_for()
        assert await page.locator("main [role=status]").inner_text() == "You have signed out."
        for part in ("#team-switch", "header nav", "#ring", "#sign-out"):  # nothing of a signed-in header
            assert await page.locator(part).is_hidden(), (width, part)
        assert await layout_problems(page, "main") == [], width
        assert await axe_violations(page) == [], width
        await context.close()
