"""My Team's and Clusters' controls in real Chromium: an owner adds a member and issues a cluster a new key, each
after its confirmation, and sees the key once with a Copy button; a member sees none of these controls."""

from __future__ import annotations

import secrets
from typing import Any

import asyncpg
import httpx

from tests.conftest import Stack
from tests.integration.conftest import Team

METRICS = {"cpu": 1, "memory": 1, "disk": 1, "network": 1}


async def test_an_owner_adds_a_member_and_issues_a_new_key_after_confirming(
    page: Any, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    await pool.execute(
        "update memberships set role = 'owner' where team_id = $1 and user_id = $2", team.id, team.user_id
    )
    name = f"Grace {secrets.token_hex(3)}"
    await pool.execute("insert into users (name) values ($1)", name)
    base = stack.nodes[0].http
    await page.goto(f"{base}/#/team")
    await page.get_by_role("button", name="Add member").click()
    await page.get_by_label("User (their name or id)").fill(name)
    await page.locator("dialog").get_by_role("button", name="Add member").click()
    await page.locator(".toast", has_text="Member added").wait_for()
    await page.locator("main tr", has_text=name).wait_for()
    assert (
        await pool.fetchval(
            "select m.role from memberships m join users u on u.id = m.user_id where m.team_id = $1 and u.name = $2",
            team.id,
            name,
        )
        == "member"
    )

    await page.goto(f"{base}/#/clusters")
    await page.get_by_role("button", name="New key for gpu-1").click()
    dialog = page.locator("dialog", has_text="Issue a new key for gpu-1?")
    await dialog.wait_for()
    assert "Its current key stops working at once" in await dialog.inner_text()
    await dialog.get_by_role("button", name="Issue new key").click()
    shown = page.locator("dialog", has_text="it won't be shown again")
    await shown.wait_for()
    await shown.get_by_role("button", name="Copy").wait_for()
    key = await shown.locator("[data-key-shown]").input_value()
    assert key.startswith(f"c{team.cluster_id}.")
    await page.screenshot(path="/tmp/team_admin_key_1400.png")
    await shown.get_by_role("button", name="Done").click()
    async with httpx.AsyncClient(base_url=base) as client:
        old = await client.post(
            "/api/ingest/metrics", json=METRICS, headers={"Authorization": f"Bearer {team.cluster_key}"}
        )
        new = await client.post("/api/ingest/metrics", json=METRICS, headers={"Authorization": f"Bearer {key}"})
    assert (old.status_code, new.status_code < 300) == (401, True)


async def test_a_member_sees_none_of_the_controls(page: Any, stack: Stack, team: Team) -> None:
    base = stack.nodes[0].http
    await page.goto(f"{base}/#/team")
    await page.locator("main td", has_text="member").first.wait_for()  # the page knows the person's role now
    for label in ("Add member", "Change role", "Remove"):
        assert await page.get_by_role("button", name=label).count() == 0, label
    await page.goto(f"{base}/#/clusters")
    await page.locator("main h1", has_text="Clusters").wait_for()
    for label in ("Add cluster", "New key", "Remove"):
        assert await page.get_by_role("button", name=label).count() == 0, label
