"""Keyboard and themes, in real Chromium: the lists' shortcuts taken the way a person takes them (keys pressed, the
focused and selected rows seen), the `?` overlay listing the one table that binds them, and the dark theme (the
system's, or chosen in Account) clean under axe-core at 1400 and 360 px."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.browser.helpers import axe_violations, open_groups
from tests.browser.test_finishes import LOOK_AWAY
from tests.browser.test_submissions_lifecycle import submission
from tests.conftest import Process, Stack
from tests.integration.conftest import Team, insert_jobs
from tests.integration.test_submission_windows import saved, window

FOCUSED = "() => document.activeElement?.dataset?.sub || document.activeElement?.dataset?.head || document.activeElement?.dataset?.card || null"
SELECTED = "() => [...document.querySelectorAll('tr[data-sub].selected')].map(e => e.dataset.sub).sort().join()"
SHOTS = Path("/tmp/keys-theme-shots")
# The lifecycle diagram as drawn: its ground's colour, the dialog's, and each text whose contrast with the ground is
# under 4.5:1 (with its colour and ratio).
DIAGRAM_CONTRAST = """() => {
  const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => { const [r, g, b] = rgb(c).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const svg = document.querySelector('dialog.lifecycle svg');
  const ground = getComputedStyle(svg.querySelector('.ground')).fill;
  const faint = [...svg.querySelectorAll('text')].map((t) => [t.textContent, getComputedStyle(t).fill])
    .filter(([, fill]) => ratio(fill, ground) < 4.5).map(([w, fill]) => `${w}: ${fill} ${ratio(fill, ground).toFixed(2)}`);
  return [ground, getComputedStyle(document.querySelector('dialog.lifecycle')).backgroundColor, faint];
}"""


async def focused(page: Any) -> str | None:
    value: str | None = await page.evaluate(FOCUSED)
    return value


async def submissions_page(page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, n: int = 3) -> list[str]:
    held = (await window(stack, team, limit=1))["total"]
    for i in range(n):
        await submission(pool, team, f"Shortcut run {i}")
    # Opened once the relay saved them, as a person opens it after submitting: rows saved after the page's read
    # are announced ("3 new, show"), not slipped into the table, and a busy machine may save them that late.
    await saved(stack, team, held + n)
    await page.goto(f"{stack.nodes[0].http}/submissions")
    # The team may hold submissions from before: at least these.
    await page.wait_for_function(f"document.querySelectorAll('tr[data-sub]').length >= {n}", timeout=90_000)
    ids: list[str] = await page.evaluate("[...document.querySelectorAll('tr[data-sub]')].map(e => e.dataset.sub)")
    return ids


async def test_the_submissions_rows_move_select_search_open_and_act_by_key(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    first, second, third, *_ = await submissions_page(page, stack, pool, team)
    await page.evaluate("document.activeElement?.blur()")
    await page.keyboard.press("j")  # no row focused: j goes to the list
    assert await focused(page) == first
    await page.keyboard.press("j")
    await page.keyboard.press("ArrowDown")
    assert await focused(page) == third
    await page.keyboard.press("k")
    assert await focused(page) == second
    await page.keyboard.press("x")
    assert await page.evaluate(SELECTED) == second
    await page.keyboard.press("j")
    await page.keyboard.press("Space")  # Space too; the others stay selected
    assert await page.evaluate(SELECTED) == ",".join(sorted([second, third]))
    await page.keyboard.press("x")  # again: unselected
    assert await page.evaluate(SELECTED) == second
    # A modifier held: the key is the browser's, not a shortcut.
    await page.keyboard.press("Alt+j")
    assert await focused(page) == third

    # The action key opens the actions menu for the selection; Escape closes it, focus back on the row.
    await page.keyboard.press("k")
    await page.keyboard.press("a")
    menu = page.locator(".menu[role=menu]")
    await menu.wait_for()
    assert await menu.get_attribute("aria-label") == "Submission actions"
    await page.keyboard.press("Escape")
    await menu.wait_for(state="detached")
    assert await focused(page) == second

    # / goes to the search; what is typed there is the search's, never a shortcut.
    await page.keyboard.press("/")
    assert await page.evaluate("document.activeElement.name") == "q"
    await page.keyboard.type("jkx")
    assert await page.input_value("input[name=q]") == "jkx"
    assert await page.evaluate(SELECTED) == second
    await page.fill("input[name=q]", "")

    # o opens the row: its tasks, in the panel.
    await page.locator(f"tr[data-sub='{first}']").focus()
    await page.keyboard.press("o")
    await page.wait_for_selector("#panel:not([hidden])")


async def test_question_mark_lists_every_shortcut_in_a_dialog_that_keeps_focus(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    first, *_ = await submissions_page(page, stack, pool, team)
    row = page.locator(f"tr[data-sub='{first}']")
    await row.focus()
    await page.keyboard.press("?")
    dialog = page.locator("dialog.shortcuts[open]")
    await dialog.wait_for()
    # The overlay is the table that binds the keys: every action, with every key, in its order.
    table = await page.evaluate("import('/js/keys.js').then(m => m.SHORTCUTS.map(([action, keys]) => [action, keys]))")
    shown = await page.evaluate(
        "[...document.querySelectorAll('dialog.shortcuts tbody tr')].map(tr => [tr.dataset.action,"
        " [...tr.querySelectorAll('kbd')].map(k => k.textContent)])"
    )
    names = {
        " ": "Space",
        "ArrowDown": "↓",
        "ArrowUp": "↑",
        "ContextMenu": "Menu key",
        "Delete": "Del",
        "Escape": "Esc",
    }
    assert shown == [[action, [names.get(k, k) for k in keys]] for action, keys in table]
    assert {"down", "up", "select", "search", "open", "act", "retry", "delete", "close", "help"} <= {
        a for a, _ in table
    }
    # Focus stays inside it (a modal dialog), and Escape gives it back to the row.
    for _ in range(4):
        await page.keyboard.press("Tab")
        assert await page.evaluate("!!document.activeElement.closest('dialog.shortcuts')")
    assert await axe_violations(page) == []
    await page.keyboard.press("Escape")
    await dialog.wait_for(state="detached")
    assert await focused(page) == first
    # Typing a ? into the search is a question mark, not the overlay.
    await page.click("input[name=q]")
    await page.keyboard.type("?")
    assert await page.input_value("input[name=q]") == "?"
    assert await page.locator("dialog.shortcuts").count() == 0


async def test_the_popover_and_dashboard_lists_move_open_and_act_by_key(
    page: Any, pool: asyncpg.Pool, team: Team
) -> None:
    other = await pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, 'Second batch') returning id", team.id
    )
    await insert_jobs(pool, team, 2)
    await insert_jobs(pool, team, 2, other)
    await page.wait_for_function("document.querySelectorAll('.cards [data-card]').length >= 2")

    # The dashboard's cards: j goes to the first card, k and j move, o opens its jobs, a its menu.
    await page.evaluate("document.activeElement?.blur()")
    await page.keyboard.press("j")
    cards = await page.evaluate("[...document.querySelectorAll('.cards [data-card]')].map(e => e.dataset.card)")
    assert await focused(page) == cards[0]
    await page.keyboard.press("j")
    assert await focused(page) == cards[1]
    await page.keyboard.press("a")
    await page.locator(".menu[role=menu]").wait_for()
    await page.keyboard.press("Escape")
    await page.locator(".menu[role=menu]").wait_for(state="detached")
    await page.keyboard.press("o")
    await page.wait_for_selector("#panel:not([hidden])")
    await page.click("#panel-close")

    # The popover's trajectories: its first is focused as it opens; j moves, Enter opens, / searches. (Opened
    # once the team channel lists both: the cards read them from the API, the popover from the channel, which a
    # busy machine may bring a moment later.)
    await page.click("#ring")
    await page.wait_for_function("document.querySelectorAll('#popover:not([hidden]) [data-head]').length >= 2")
    await page.keyboard.press("Escape")
    await page.wait_for_selector("#popover", state="hidden")
    await page.click("#ring")
    await page.wait_for_selector("#popover:not([hidden]) [data-head]")
    heads = await page.evaluate("[...document.querySelectorAll('#popover [data-head]')].map(e => e.dataset.head)")
    assert len(heads) >= 2 and await focused(page) == heads[0]
    await page.keyboard.press("j")
    assert await focused(page) == heads[1]
    await page.keyboard.press("Enter")
    await page.wait_for_selector(f"[data-head='{heads[1]}'][aria-expanded='true']")
    await page.keyboard.press("/")
    assert await page.evaluate("document.activeElement.name") == "find"


@pytest.mark.parametrize("width", [1400, 360])
@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_both_themes_follow_the_system_and_pass_axe(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, width: int, scheme: str
) -> None:
    await page.set_viewport_size({"width": width, "height": 800})
    await page.emulate_media(color_scheme=scheme)
    await insert_jobs(pool, team, 3)
    await page.wait_for_selector(".cards [data-card]")
    background = await page.evaluate("getComputedStyle(document.body).backgroundColor")
    dark = background != "rgb(246, 247, 249)"
    assert dark == (scheme == "dark"), background
    SHOTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"dashboard-{scheme}-{width}.png"))
    found = {"dashboard": await axe_violations(page)}
    await page.click("#ring")
    await page.wait_for_selector("#popover:not([hidden]) [data-head]")
    found["popover"] = await axe_violations(page)
    await page.screenshot(path=str(SHOTS / f"popover-{scheme}-{width}.png"))
    await page.keyboard.press("Escape")
    await submissions_page(page, stack, pool, team)
    await page.click("tr[data-sub]")
    await page.screenshot(path=str(SHOTS / f"submissions-{scheme}-{width}.png"))
    found["submissions"] = await axe_violations(page)
    await page.keyboard.press("?")
    await page.wait_for_selector("dialog.shortcuts[open]")
    await page.screenshot(path=str(SHOTS / f"shortcuts-{scheme}-{width}.png"))
    found["shortcuts"] = await axe_violations(page)
    await page.keyboard.press("Escape")
    await page.click(".lifecycle-link")
    # The picture (drawn at 1400; at 360 its statuses and moves are laid out downwards, the picture hidden).
    await page.wait_for_selector("dialog.lifecycle[open] svg g.status", state="attached")
    await page.wait_for_selector("dialog.lifecycle[open] .diagram > :is(svg, .steps):visible")
    await page.screenshot(path=str(SHOTS / f"lifecycle-{scheme}-{width}.png"))
    found["lifecycle"] = await axe_violations(page)
    # axe does not read an SVG's text: the diagram's ground is the dialog's, and every word on it reads (4.5:1).
    ground, dialog, faint = await page.evaluate(DIAGRAM_CONTRAST)
    assert ground == dialog and faint == [], (ground, dialog, faint)
    await page.keyboard.press("Escape")
    # My Team and Clusters (a manager's buttons), the Activity: in the theme's colours too, as an owner sees them.
    await pool.execute(
        "update memberships set role = 'owner' where team_id = $1 and user_id = $2", team.id, team.user_id
    )
    for where, ready in (
        ("team", "[data-add-member]"),
        ("clusters", "[data-add-cluster]"),
        ("activity", "table.activity"),
    ):
        await page.goto(f"{stack.nodes[0].http}/#/{where}")
        await page.wait_for_selector(ready)
        found[where] = await axe_violations(page)
    assert {k: v for k, v in found.items() if v} == {}


@pytest.mark.parametrize("width", [1400, 360])
@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_the_panels_tabs_the_bells_list_and_the_sign_in_pages_pass_axe_in_both_themes(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team, demo_node: Process, width: int, scheme: str
) -> None:
    """The views the theme audit above left out: each tab of the trajectory panel open, the bell's list open with a
    finish in it, the page a sign-out lands on, the sign-in link's confirmation page and the demo's picker."""
    await page.set_viewport_size({"width": width, "height": 800})
    await page.emulate_media(color_scheme=scheme)
    base = stack.nodes[0].http
    analysis = await pool.fetchval(
        "insert into analyses (trajectory_id, plugin) values ($1, 'Radial Distribution Function') returning id",
        team.trajectory_id,
    )
    ids = await insert_jobs(pool, team, 3)
    await pool.execute(
        "update jobs set kind = 'analysis', analysis_id = $2 where id = any($1::bigint[])", ids, analysis
    )
    found: dict[str, list[dict[str, Any]]] = {}
    await page.click(f"[data-menu='{team.trajectory_id}']")
    await page.click(".menu li:text-is('Compute jobs')")
    await open_groups(page, "#panel", 1)
    found["panel, Jobs"] = await axe_violations(page)
    await page.click("#tab-analyses")
    await page.wait_for_selector(f"#panel tr[data-analysis='{analysis}']")
    found["panel, Analyses"] = await axe_violations(page)
    await page.click("#panel-close")
    # The trajectory whose panel the person opened finishes while they look: a toast, kept in the bell's list.
    await page.evaluate(LOOK_AWAY, False)
    await pool.execute("update jobs set status = 'completed' where trajectory_id = $1", team.trajectory_id)
    await page.locator(".toast", has_text="completed successfully").wait_for()
    await page.click("#bell")
    await page.wait_for_selector("#history:not([hidden]) .entry")
    found["the bell's list"] = await axe_violations(page)
    await page.keyboard.press("Escape")
    await page.goto(f"{base}/?token={team.token}")  # (a sign-out revokes the token: before it)
    await page.wait_for_selector("#confirm-sign-in")
    found["a sign-in link's confirmation"] = await axe_violations(page)
    await page.goto(f"{base}/")
    await page.wait_for_function("window.gatewayLive && document.body.dataset.live === 'live'")
    if width == 360:  # Sign out is behind the header's menu button there
        await page.click("#nav-toggle")
    await page.get_by_role("button", name="Sign out").click()
    await page.wait_for_url(f"{base}/?signin=out")
    await page.locator("main [role=status]", has_text="You have signed out.").wait_for()
    found["signed out"] = await axe_violations(page)
    await page.goto(f"{demo_node.http}/?signin=out")
    await page.locator("main h1", has_text="Sign in to the demo").wait_for()
    await page.wait_for_selector(".picker [data-user]")
    found["the demo's picker, signed out"] = await axe_violations(page)
    assert {k: v for k, v in found.items() if v} == {}


async def test_account_chooses_the_theme_for_this_browser_before_the_first_paint(page: Any, stack: Stack) -> None:
    await page.emulate_media(color_scheme="light")
    await page.goto(f"{stack.nodes[0].http}/#/account")
    await page.check("input[name=theme][value=dark]")
    assert await page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert await page.evaluate("localStorage.getItem('theme')") == "dark"
    assert await page.evaluate("getComputedStyle(document.body).backgroundColor") != "rgb(246, 247, 249)"
    await page.wait_for_selector("tr[data-session]")
    assert await axe_violations(page) == []
    # A reload paints dark from the start: the attribute is there before any module runs.
    await page.add_init_script(
        "document.addEventListener('readystatechange', () => { if (document.readyState === 'interactive')"
        " window.themeAtParse = document.documentElement.dataset.theme || 'none'; }, { once: true })"
    )
    await page.reload()
    await page.wait_for_selector("input[name=theme][value=dark]:checked")
    assert await page.evaluate("window.themeAtParse") == "dark"
    # System again: the system's light.
    await page.check("input[name=theme][value=system]")
    assert await page.evaluate("document.documentElement.dataset.theme ?? null") is None
    assert await page.evaluate("localStorage.getItem('theme')") is None
    assert await page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(246, 247, 249)"
