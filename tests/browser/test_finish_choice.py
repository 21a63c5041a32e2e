"""Which finishes reach a person, chosen in Account ("Finishes that reach me": mine, my team's, none), in real
Chromium: with "My team's" a teammate's finishes reach the person folded into one toast that counts them and names
the person's own; with "None" no finish raises a toast or a browser notification. The choice is kept on the server:
it survives a reload and is the same in another browser."""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.browser.helpers import axe_violations, sign_in
from tests.browser.test_finishes import LOOK_AWAY, RECORD_NOTIFICATIONS, trajectory
from tests.conftest import Stack
from tests.integration.conftest import Team, insert_jobs

# Every notice the page hears is recorded as it reaches the page's state (the toast is decided right after).
TAP_NOTICES = """() => {
  const team = window.gatewayApp.team;
  if (team.__tapped) return;
  const apply = team.apply.bind(team);
  window.__notices = [];
  team.apply = (m) => { if (m.type === "notice") window.__notices.push(m.trajectory_id); return apply(m); };
  team.__tapped = true;
}"""
FINISH_TOASTS = "#toasts .toast[data-kind=finish]"


async def member(pool: asyncpg.Pool, team: Team, name: str) -> int:
    """A teammate: another member of the person's team."""
    user_id = int(await pool.fetchval("insert into users (name) values ($1) returning id", name))
    await pool.execute("insert into memberships values ($1, $2)", team.id, user_id)
    return user_id


async def submitted(pool: asyncpg.Pool, team: Team, user_id: int, name: str) -> tuple[int, int]:
    """A trajectory uploaded by `user_id`: (trajectory, submission)."""
    t = await trajectory(pool, team, name)
    s = await pool.fetchval(
        "insert into submissions (team_id, trajectory_id, user_id, title) values ($1, $2, $3, $4) returning id",
        team.id,
        t,
        user_id,
        name,
    )
    return t, int(s)


async def finish_together(pool: asyncpg.Pool, team: Team, runs: list[tuple[int, int]], failing: int = 0) -> None:
    """Work on each run's trajectory, then all of it ends in one statement (the `failing` trajectory's with a
    failed job): their waves finish together."""
    for t, s in runs:
        ids = await insert_jobs(pool, team, 2, trajectory_id=t)
        await pool.execute("update jobs set submission_id = $2 where id = any($1::bigint[])", ids, s)
    await pool.execute(
        "update jobs set status = case when trajectory_id = $2 and frame = 0 then 'failed' else 'completed' end"
        " where trajectory_id = any($1::bigint[])",
        [t for t, _ in runs],
        failing,
    )


async def choose(page: Any, value: str) -> None:
    """In Account, the person picks an answer to "Finishes that reach me"; the server keeps it."""
    await page.evaluate("location.hash = '#/account'")
    choice = page.locator(f"fieldset.finishes input[value={value}]")
    async with page.expect_response(lambda r: r.url.endswith("/api/account/preferences")) as answered:
        await choice.check()
    assert (await answered.value).ok
    await page.wait_for_function(f"window.gatewayApp.me.finishes === '{value}'")


async def chosen(page: Any) -> str:
    """The answer Account shows, once the page has read the account from the server."""
    await page.evaluate("location.hash = '#/account'")
    await page.wait_for_function("document.querySelector('main .who')?.textContent.startsWith('Signed in as')")
    return str(await page.eval_on_selector("fieldset.finishes input:checked", "e => e.value"))


async def back_to_dashboard(page: Any) -> None:
    await page.evaluate("location.hash = '#/'")
    await page.wait_for_function("document.body.dataset.live === 'live'")
    await page.evaluate(TAP_NOTICES)


async def test_my_teams_finishes_reach_me_in_one_counted_toast(
    browser: Any, page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    base = page.url.rstrip("/")
    ada = await member(pool, team, "Ada Teammate")
    assert await chosen(page) == "mine"  # the default: today's behaviour
    assert await axe_violations(page) == []
    await choose(page, "team")

    # It survives a reload, and it is the same in another browser: it is kept on the server.
    await page.reload()
    await page.wait_for_function("document.body.dataset.live === 'live'")
    assert await page.evaluate("window.gatewayApp.me.finishes") == "team"
    assert await chosen(page) == "team"
    other = await browser.new_context(viewport={"width": 1200, "height": 800}, bypass_csp=True)
    try:
        elsewhere = await other.new_page()
        await sign_in(elsewhere, base, team.token)
        await elsewhere.wait_for_function("window.gatewayApp && window.gatewayApp.me")
        assert await chosen(elsewhere) == "team"
    finally:
        await other.close()

    # Four of the teammate's uploads and one of the person's finish together, one of the teammate's with errors.
    theirs = [await submitted(pool, team, ada, f"Ada's run {n}") for n in range(4)]
    mine = await submitted(pool, team, team.user_id, "Lipid bilayer 310K")
    await back_to_dashboard(page)
    await page.evaluate(LOOK_AWAY, False)  # looking, whatever the headless window says
    await finish_together(pool, team, [*theirs, mine], failing=theirs[1][0])
    await page.wait_for_function(f"window.__notices.length >= 5 && document.querySelectorAll('{FINISH_TOASTS}').length")
    await page.wait_for_function(
        f"document.querySelector('{FINISH_TOASTS}')?.innerText.includes('5 trajectories finished')"
    )
    toasts = await page.eval_on_selector_all(FINISH_TOASTS, "els => els.map(e => e.innerText.split('\\n')[0])")
    assert toasts == ["5 trajectories finished: 4 successfully, 1 with errors yours: Lipid bilayer 310K"]


async def test_none_of_the_finishes_reach_me_when_i_choose_none(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    base = page.url.rstrip("/")
    ada = await member(pool, team, "Ada Teammate")
    await page.context.add_init_script(RECORD_NOTIFICATIONS)
    await page.context.grant_permissions(["notifications"], origin=base)
    await choose(page, "none")
    await page.reload()
    await page.wait_for_function("document.body.dataset.live === 'live'")
    assert await chosen(page) == "none"

    # Notifications are switched on, and the person looks away: still none, nor any toast in the bell's list.
    await back_to_dashboard(page)
    await page.click("#bell")
    await page.locator("#history input[name=notify]").check()
    assert "choose which do in Account" in await page.inner_text("#history .notify-note")
    await page.click("#bell")
    await page.evaluate(LOOK_AWAY, True)
    runs = [await submitted(pool, team, ada, "Ada's run"), await submitted(pool, team, team.user_id, "My own run")]
    await finish_together(pool, team, runs)
    await page.wait_for_function("window.__notices.length >= 2")
    await page.evaluate(LOOK_AWAY, False)
    assert await page.locator(FINISH_TOASTS).count() == 0
    assert await page.evaluate("window.__notifications.length") == 0
    assert await page.locator("#bell .badge").is_hidden()
    # The rows still tell it: each card says its jobs completed.
    for t, _ in runs:
        await page.wait_for_function(f"(window.gatewayApp.team.summaries.get({t}) || {{}}).counts?.completed === 2")


async def test_a_choice_made_in_one_tab_holds_at_once_in_the_persons_other_tabs(
    browser: Any, page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """No reload: the server tells every open socket of the person (another browser, another node), and a finish
    that comes after it is told as the new choice says."""
    ada = await member(pool, team, "Ada Teammate")
    other = await browser.new_context(viewport={"width": 1200, "height": 800}, bypass_csp=True)
    try:
        account_tab = await other.new_page()
        await sign_in(account_tab, stack.nodes[1].http, team.token)  # the other node
        await account_tab.wait_for_function("document.body.dataset.live === 'live'")
        assert await chosen(account_tab) == "mine"
        await back_to_dashboard(page)  # this tab stays on its dashboard, live, never reloaded
        assert await page.evaluate("window.gatewayApp.me.finishes") == "mine"
        await choose(account_tab, "team")
        await page.wait_for_function("window.gatewayApp.me.finishes === 'team'", timeout=10_000)
        # A teammate's finish now reaches this tab, as "my team's" says.
        theirs = await submitted(pool, team, ada, "Ada's run")
        await finish_together(pool, team, [theirs])
        await page.locator(FINISH_TOASTS).wait_for(timeout=30_000)
        # And back, from this tab's Account: the other tab's choice shows it at once, its radio too.
        await choose(page, "none")
        await account_tab.wait_for_selector("fieldset.finishes input[value=none]:checked", timeout=10_000)
        assert await account_tab.evaluate("window.gatewayApp.me.finishes") == "none"
    finally:
        await other.close()
