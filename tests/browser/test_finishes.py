"""A finish reaches a person who looked away, in real Chromium: the team channel brings every finish,
the person's own raise a toast and, if they asked for it, a browser notification with the same words; the last
hour's toasts wait under the bell, read or unread, across a reload. And a job row says where it runs and which
attempt it is on."""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.browser.helpers import axe_violations, open_groups
from tests.integration.conftest import Team, insert_jobs
from tests.integration.test_actions import add_cluster

# Every Notification the page constructs is recorded (and still shown by the real one); so are permission requests.
RECORD_NOTIFICATIONS = """(() => {
  const Real = window.Notification;
  window.__notifications = [];
  window.__asked = 0;
  class Recorded extends Real {
    constructor(title, options) { super(title, options); window.__notifications.push({ title, body: options && options.body, n: this }); }
  }
  Object.defineProperty(Recorded, "permission", { get: () => Real.permission });
  Recorded.requestPermission = (...a) => { window.__asked++; return Real.requestPermission(...a); };
  window.Notification = Recorded;
})();"""

# The person looks at another tab (or comes back): the page is hidden and has no focus.
LOOK_AWAY = """(away) => {
  for (const [name, value] of [["visibilityState", away ? "hidden" : "visible"], ["hidden", away]])
    Object.defineProperty(document, name, { value, configurable: true });
  document.hasFocus = () => !away;
  document.dispatchEvent(new Event("visibilitychange"));
  if (!away) window.dispatchEvent(new Event("focus"));
}"""


async def trajectory(pool: asyncpg.Pool, team: Team, name: str) -> int:
    return int(
        await pool.fetchval("insert into trajectories (team_id, name) values ($1, $2) returning id", team.id, name)
    )


async def finish(pool: asyncpg.Pool, team: Team, trajectory_id: int, submission: int | None = None) -> None:
    """Work on the trajectory (of `submission`), and every job of it completes: its wave finishes."""
    ids = await insert_jobs(pool, team, 2, trajectory_id=trajectory_id)
    if submission is not None:
        await pool.execute("update jobs set submission_id = $2 where id = any($1::bigint[])", ids, submission)
    await pool.execute("update jobs set status = 'completed' where trajectory_id = $1", trajectory_id)


async def test_my_finish_reaches_me_while_i_look_away(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    base = page.url.rstrip("/")
    await page.context.add_init_script(RECORD_NOTIFICATIONS)
    opened = await trajectory(pool, team, "Copper grain run 12")  # theirs: they open its panel today
    submitted = await trajectory(pool, team, "Lipid bilayer 310K")  # theirs: their own submission ran
    others = await trajectory(pool, team, "Someone else's run")  # a teammate's: none of theirs
    mine = await pool.fetchval(
        "insert into submissions (team_id, trajectory_id, user_id, title) values ($1, $2, $3, 'my upload') returning id",
        team.id,
        submitted,
        team.user_id,
    )
    for t in (opened, others):
        await insert_jobs(pool, team, 1, trajectory_id=t)
    await page.reload()
    await page.wait_for_function("document.body.dataset.live === 'live'")
    assert await page.evaluate("window.__asked") == 0  # nothing is asked before the person switches it on

    # Notifications are asked for in the bell's list; the browser's permission is asked only now.
    await page.click("#bell")
    toggle = page.locator("#history input[name=notify]")
    await toggle.check()
    await page.wait_for_function("window.__asked === 1")
    await page.wait_for_function("!document.querySelector('#history input[name=notify]').checked")  # refused: off
    await page.context.grant_permissions(["notifications"], origin=base)
    await toggle.check()
    await page.wait_for_function("document.querySelector('#history input[name=notify]').checked")
    await page.keyboard.press("Escape")
    await page.wait_for_selector("#history", state="hidden")
    assert await page.evaluate("document.activeElement.id") == "bell"

    await page.click(f"[data-menu='{opened}']")
    await page.click(".menu li:text-is('Compute jobs')")
    await page.wait_for_selector("#panel [data-group]")
    await page.click("#panel-close")

    await page.evaluate(LOOK_AWAY, True)
    await finish(pool, team, opened)
    await finish(pool, team, submitted, mine)
    await finish(pool, team, others)
    await page.wait_for_function(f"window.gatewayApp.team.glowing.has({others})")  # its finish came and went
    await page.wait_for_function("window.__notifications.length === 1")
    # At most one notification a minute: the second finish waits to be told with whatever else finishes.
    seen = await page.evaluate("window.__notifications.map(x => [x.title, x.body])")
    assert seen == [["Jobs completed successfully", "Copper grain run 12"]]
    await page.wait_for_function("document.querySelector('#toasts .toast')?.innerText.includes('2 trajectories')")
    toasts = await page.eval_on_selector_all("#toasts .toast", "els => els.map(e => e.innerText)")
    assert [t.split("\n")[0] for t in toasts] == [  # one toast counts them, and names the person's own
        "2 trajectories finished: 2 successfully yours: Copper grain run 12, Lipid bilayer 310K",
    ]
    assert await page.locator("#toasts .toast[data-waiting]").count() == 1  # it waits for the person
    assert await page.inner_text("#bell .badge") == "2"  # the bell's list keeps each
    assert (await page.title()).startswith("(2) ")

    # Clicking a notification brings the page back with that trajectory's panel open (the address holds it).
    await page.evaluate("window.__notifications[0].n.onclick()")
    await page.wait_for_selector("#panel:not([hidden])")
    assert await page.inner_text("#panel-title") == "Copper grain run 12"
    assert f"panel={opened}" in page.url
    await page.evaluate(LOOK_AWAY, False)
    await page.wait_for_selector("#toasts .toast[data-waiting]", state="detached")  # their time runs now

    # Under the bell: both, the one opened already read; opening the list reads the other.
    assert await page.inner_text("#bell .badge") == "1"
    await page.focus("#bell")
    await page.keyboard.press("Enter")
    await page.wait_for_selector("#history:not([hidden])")
    entries = await page.eval_on_selector_all(
        "#history .entry", "els => els.map(e => [e.innerText, e.classList.contains('unread')])"
    )
    assert len(entries) == 2
    assert {("Lipid bilayer 310K" in text, unread) for text, unread in entries} == {(True, True), (False, False)}
    assert await page.evaluate("document.activeElement.closest('#history') !== null")
    assert await axe_violations(page) == []
    await page.wait_for_selector("#bell .badge", state="hidden")
    assert not (await page.title()).startswith("(")
    await page.keyboard.press("Escape")

    # The list survives a reload, read; Open takes the person to the trajectory.
    await page.reload()
    await page.wait_for_function("document.body.dataset.live === 'live'")
    await page.click("#bell")
    entry = page.locator("#history .entry", has_text="Jobs completed successfully Copper grain run 12")
    assert await entry.count() == 1 and "unread" not in (await entry.get_attribute("class") or "")
    await entry.locator("button.open").click()
    await page.wait_for_selector("#history", state="hidden")
    assert await page.inner_text("#panel-title") == "Copper grain run 12"


async def test_a_finish_while_i_look_is_a_toast_and_no_notification(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    """The person looking at the page reads the toast (born read); the notification is for when they look away."""
    base = page.url.rstrip("/")
    await page.context.add_init_script(RECORD_NOTIFICATIONS)
    await page.context.grant_permissions(["notifications"], origin=base)
    await insert_jobs(pool, team, 1)
    await page.reload()
    await page.wait_for_function("document.body.dataset.live === 'live'")
    await page.click("#bell")
    await page.locator("#history input[name=notify]").check()
    await page.click("#bell")
    await page.click(f"[data-menu='{team.trajectory_id}']")
    await page.click(".menu li:text-is('Compute jobs')")
    await page.wait_for_selector("#panel [data-group]")
    await page.evaluate(LOOK_AWAY, False)  # looking, whatever the headless window says
    await finish(pool, team, team.trajectory_id)
    await page.locator(".toast", has_text="Jobs completed successfully").wait_for()
    assert await page.evaluate("window.__notifications.length") == 0
    assert await page.locator("#bell .badge").is_hidden()


async def test_a_job_row_names_its_cluster_and_attempt(page: Any, pool: asyncpg.Pool, team: Team) -> None:
    # cpu-big joins the team after the page loaded: its name is read again when a job names it.
    await add_cluster(pool, team, "cpu-big")
    other = await pool.fetchval("select id from clusters where team_id = $1 and name = 'cpu-big'", team.id)
    await pool.execute(
        "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame, status, attempts) values"
        " ($1, $2, $3, 'preprocess', 'Preprocess trajectory frame', 0, 'running', 1),"
        " ($1, $2, $3, 'preprocess', 'Preprocess trajectory frame', 1, 'retrying', 2),"
        " ($1, $2, $4, 'preprocess', 'Preprocess trajectory frame', 2, 'retrying', 4)",
        team.id,
        team.trajectory_id,
        team.cluster_id,
        other,
    )
    await page.click(f"[data-menu='{team.trajectory_id}']")
    await page.click(".menu li:text-is('Compute jobs')")
    await open_groups(page, "#panel", 3)
    await page.wait_for_function(
        "[...document.querySelectorAll('#panel .row.job .where')].some(e => e.textContent === 'cpu-big')"
    )
    rows = await page.eval_on_selector_all(
        "#panel .row.job",
        "els => els.map(e => [e.querySelector('.where').textContent, e.querySelector('.attempt').textContent])",
    )
    assert rows == [
        ["gpu-1", ""],  # a first attempt says nothing
        ["gpu-1", "attempt 2 of 3"],
        ["cpu-big", "attempt 4"],  # a person retried it past its three automatic attempts
    ]
