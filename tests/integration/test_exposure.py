"""What a node shows the world: security headers on pages and files, /metrics only to who may scrape it, and
the HTTP API's per-user and per-cluster rate (429 with Retry-After)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from gateway.embedded import free_port
from tests.conftest import Process, Stack, spawn, wait_http
from tests.integration.conftest import Team, make_team

METRICS_TOKEN = "scrape-me-0123456789"


@pytest.fixture(scope="module")
def limited_node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """A node with a metrics token and a tight HTTP rate: one request a second, bursts of two."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_METRICS_TOKEN": METRICS_TOKEN,
        "GATEWAY_HTTP_RATE": "1",
        "GATEWAY_HTTP_BURST": "2",
    }
    node = spawn(
        "node-limited-http", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("limited-http"), port
    )
    try:
        wait_http(node)
        yield node
    finally:
        node.stop()


FRONTEND = Path(__file__).resolve().parents[2] / "frontend"
# Every file the app serves (its tests and test vectors are files too), and every page.
FILES = sorted(f"/{p.relative_to(FRONTEND).as_posix()}" for p in FRONTEND.rglob("*") if p.is_file())
PAGES = ["/", "/submissions", "/?signin=expired", "/submissions/lifecycle.svg", "/no-such-page", "/api/me"]


@pytest.mark.parametrize("path", PAGES + FILES)
async def test_pages_files_and_answers_carry_the_security_headers(stack: Stack, path: str) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        answer = await client.get(path)
    assert answer.status_code in (200, 401, 404)
    assert_security_headers(answer, path)


async def test_the_sign_in_links_confirmation_page_sends_no_referrer(stack: Stack, team: Team) -> None:
    """Its own requests (`/style.css`, `/js/confirm.js`) would otherwise carry the token in their Referer."""
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        answer = await client.get("/", params={"token": team.token})
    assert answer.status_code == 200 and 'id="confirm-sign-in"' in answer.text
    assert_security_headers(answer, "/")


def assert_security_headers(answer: httpx.Response, path: str) -> None:
    policy = answer.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "'unsafe-inline'" not in policy and "frame-ancestors 'none'" in policy
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["referrer-policy"] == "no-referrer"
    if path.endswith(".js"):
        assert answer.headers["content-type"].startswith(("text/javascript", "application/javascript"))


async def test_the_app_has_no_inline_script_style_or_handler(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        html = (await client.get("/")).text
    assert "<script>" not in html and "<style" not in html and " style=" not in html and " onclick=" not in html


async def test_metrics_without_a_token_are_served_to_this_host_only(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        local = await client.get("/metrics")
        assert local.status_code == 200 and "gateway_connections" in local.text
        assert "pid=" not in local.text and "xid=" not in local.text  # the relay's log names a blocker instead
        forwarded = await client.get("/metrics", headers={"X-Forwarded-For": "203.0.113.7"})
    assert forwarded.status_code == 403 and forwarded.json()["error"] == "forbidden"


async def test_metrics_with_a_token_need_it(limited_node: Process) -> None:
    async with httpx.AsyncClient(base_url=limited_node.http) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            refused = await client.get("/metrics", headers=headers)
            assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
            assert refused.headers["www-authenticate"] == "Bearer"
        scraped = await client.get("/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert scraped.status_code == 200 and "gateway_connections" in scraped.text


async def test_past_its_rate_a_user_gets_429_with_retry_after_and_others_do_not(
    limited_node: Process, stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    other = await make_team(pool, stack.secret)
    async with httpx.AsyncClient(base_url=limited_node.http) as client:
        mine = {"Authorization": f"Bearer {team.token}"}
        answers = [await client.get("/api/me", headers=mine) for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 429]
        assert answers[2].json() == {"error": "rate_limited", "message": "too many requests: at most 1 a second"}
        assert int(answers[2].headers["retry-after"]) >= 1
        assert (await client.get("/api/me", headers={"Authorization": f"Bearer {other.token}"})).status_code == 200


async def test_past_its_rate_a_cluster_gets_429_with_retry_after(limited_node: Process, team: Team) -> None:
    async with httpx.AsyncClient(
        base_url=limited_node.http, headers={"Authorization": f"Bearer {team.cluster_key}"}
    ) as client:
        answers = [await client.post("/api/ingest/jobs", json={"jobs": []}) for _ in range(3)]
        assert answers[2].status_code == 429 and int(answers[2].headers["retry-after"]) >= 1
        assert answers[2].json()["error"] == "rate_limited"
        assert {a.status_code for a in answers[:2]} != {429}
        forged = await client.post(
            "/api/ingest/jobs", json={"jobs": []}, headers={"Authorization": f"Bearer c{team.cluster_id}.forged"}
        )
    assert forged.status_code == 401  # an unchecked key spends nobody's rate
