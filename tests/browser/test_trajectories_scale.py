"""The Jobs popover and the dashboard past their old caps, in Chromium: more trajectories than the 300 the popover's
snapshot carries and than a page of cards, every one reachable and found by name, cards that tell the truth from
their first second, and what is open kept in the address."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest

from tests.browser.helpers import sign_in
from tests.conftest import Stack
from tests.integration.conftest import Team, make_team

N = 320  # more than the popover's snapshot (300) and than a page of cards (100)


@pytest.fixture
async def busy(pool: asyncpg.Pool, team: Team) -> list[int]:
    """N trajectories (named "Copper grain run 001" ...), each with a job, the oldest change first."""
    ids = [
        r["id"]
        for r in await pool.fetch(
            "insert into trajectories (team_id, name) select $1, 'Copper grain run ' || lpad(i::text, 3, '0')"
            " from generate_series(1, $2) i returning id",
            team.id,
            N,
        )
    ]
    for start in range(0, N, 40):  # in turns, so that their last changes differ
        await pool.execute(
            "insert into jobs (team_id, trajectory_id, cluster_id, kind, name, frame)"
            " select $1, t, $2, 'preprocess', 'Preprocess trajectory frame', 0 from unnest($3::bigint[]) t",
            team.id,
            team.cluster_id,
            ids[start : start + 40],
        )
    return ids


async def text_is(page: Any, selector: str, text: str) -> None:
    await page.wait_for_function(f"document.querySelector({selector!r})?.textContent === {text!r}", timeout=30_000)


async def test_the_popover_reaches_every_trajectory_and_finds_any_by_name(
    page: Any, stack: Stack, team: Team, busy: list[int]
) -> None:
    await page.wait_for_function(f"window.gatewayApp.team.total === {N}", timeout=30_000)
    await page.reload()  # a page opened now: its snapshot carries the 300 most recent
    await page.wait_for_function("window.gatewayLive && document.body.dataset.live === 'live'")
    await page.click("#ring")
    await text_is(page, ".pop-count", f"300 of {N}")
    await page.click(".older")
    await text_is(page, ".pop-count", f"{N} of {N}")
    assert await page.locator("#popover [data-head]").count() == N
    assert await page.is_hidden(".older")
    await page.fill("input[name='find']", "run 007")  # the oldest change of all, found by the server
    await text_is(page, ".pop-count", "1 of 1")
    assert await page.inner_text("#popover [data-head] .name") == "Copper grain run 007"
    assert "find=run+007" in page.url and "jobs=open" in page.url
    await page.reload()  # the popover opens again, with its search
    await text_is(page, ".pop-count", "1 of 1")
    assert await page.input_value("input[name='find']") == "run 007"


async def test_the_dashboard_pages_cards_and_finds_any_by_name(
    page: Any, stack: Stack, team: Team, busy: list[int]
) -> None:
    total = N + 1  # and the team's own trajectory
    # Arrived while it was open (or read with its first page, if the page read them after they were written):
    # counted either way.
    await page.wait_for_function(
        f"document.querySelector('.cards-bar .count')?.textContent.endsWith(' of {total} trajectories')",
        timeout=30_000,
    )
    await page.reload()  # a visit now: a page of them
    await text_is(page, ".cards-bar .count", f"100 of {total} trajectories")
    for shown in (200, 300, total):
        await page.click(".more")
        await text_is(page, ".cards-bar .count", f"{shown} of {total} trajectories")
    assert await page.locator(".card").count() == total
    assert await page.is_hidden(".more")
    await page.fill(".cards-bar input[name='q']", "grain run 02")  # 020..029
    await text_is(page, ".cards-bar .count", "10 of 10 trajectories")
    names = await page.eval_on_selector_all(".card .title-text", "els => els.map(e => e.textContent)")
    assert sorted(names) == [f"Copper grain run {i:03d}" for i in range(20, 30)]
    assert "q=grain+run+02" in page.url


async def test_a_card_tells_the_truth_from_its_first_second(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    uploading = await pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, 'Lipid bilayer upload') returning id", team.id
    )
    await pool.execute(
        "insert into submissions (team_id, trajectory_id, cluster_id, title, staging)"
        " values ($1, $2, $3, 'Upload of 2000 frames', 'uploading')",
        team.id,
        uploading,
        team.cluster_id,
    )
    card = f".card[data-card='{uploading}'] .progress"
    await page.wait_for_selector(card, timeout=30_000)  # a trajectory created since: its card comes by itself
    await text_is(page, card, "Uploading")
    await pool.execute("update submissions set staging = 'syncing' where trajectory_id = $1", uploading)
    await text_is(page, card, "Syncing to the cluster")
    await pool.execute("update submissions set staging = 'ready' where trajectory_id = $1", uploading)
    await text_is(page, card, "No jobs yet")  # a new trajectory: not "no jobs in the last 24 hours"


async def test_an_open_panel_is_in_the_address(page: Any, stack: Stack, team: Team, busy: list[int]) -> None:
    target = busy[-1]
    await page.wait_for_selector(f".card[data-card='{target}']", timeout=30_000)
    await page.click(f".card[data-card='{target}'] [data-menu]")
    await page.click("role=menuitem[name='Analyses']")
    await page.wait_for_function("location.search.includes('panel=') && location.search.includes('tab=analyses')")
    shared = page.url
    other = await page.context.new_page()  # a shared link opens the same view
    await sign_in(other, stack.nodes[0].http, team.token)
    await other.goto(shared)
    await text_is(other, "#panel-title", f"Copper grain run {N:03d}")
    assert await other.get_attribute("#tab-analyses", "aria-selected") == "true"
    await other.click("#panel-close")
    await other.wait_for_function("!location.search.includes('panel=')")
    await other.close()


async def test_a_link_to_a_trajectory_the_page_has_not_listed_opens_under_its_name(
    page: Any, stack: Stack, team: Team, busy: list[int], pool: asyncpg.Pool
) -> None:
    """A panel opened from a link, a notification or a reload, for a trajectory outside the 300 newest, was titled
    "Trajectory 53": the page knew no name for it. The server names it, whatever its age."""
    # A year old, without jobs: neither in the popover's snapshot nor on the first page of cards (320 newer).
    oldest = await pool.fetchval(
        "insert into trajectories (team_id, name, created_at) values ($1, 'Copper grain run 000', now() - interval"
        " '1 year') returning id",
        team.id,
    )
    await page.goto(f"{stack.nodes[0].http}/?panel={oldest}")
    await text_is(page, "#panel-title", "Copper grain run 000")
    assert await page.get_attribute("#panel-menu", "aria-label") == "Actions of Copper grain run 000"
    # Another team's trajectory and a missing one get the same 403: the answer tells nothing of other teams.
    stranger = await make_team(pool, stack.secret)
    auth = {"Authorization": f"Bearer {team.token}"}
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, headers=auth) as client:
        mine = await client.get(f"/api/trajectories/{oldest}")
        theirs = await client.get(f"/api/trajectories/{stranger.trajectory_id}")
        missing = await client.get("/api/trajectories/999999999")
    assert mine.json()["name"] == "Copper grain run 000"
    assert theirs.status_code == missing.status_code == 403 and theirs.json() == missing.json()
