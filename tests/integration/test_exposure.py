"""What a node shows the world: security headers on pages and files, /metrics only to who may scrape it, and
the HTTP API's per-user and per-cluster rate (429 with Retry-After)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from gateway.embedded import free_port
from tests.conftest import Process, Stack, extra_node, spawn, wait_http
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


async def raw_upgrade(port: int, host: str, token: str, origin: str) -> int:
    """The status of a websocket upgrade naming `host` and `origin`, sent as a browser on a rebinding page would."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        (
            f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nOrigin: {origin}\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            f"Cookie: gateway_token={token}\r\n\r\n"
        ).encode()
    )
    status = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    return int(status.split()[1])


async def test_a_rebinding_domain_gets_421_for_every_page_action_socket_and_metrics(stack: Stack, team: Team) -> None:
    """The attack: `evil.example` resolved to 127.0.0.1, its page in the victim's browser. It sent
    `Host: evil.example:8765` and a matching Origin: it signed in, retried jobs and opened /ws, and /metrics
    (loopback only) was readable. The node answers for its own names only (GATEWAY_HOSTS): 421 before any route."""
    node = stack.nodes[0]
    evil = f"evil.example:{node.port}"
    origin = f"http://{evil}"
    cookie = {"Cookie": f"gateway_token={team.token}", "Host": evil, "Origin": origin}
    async with httpx.AsyncClient(base_url=node.http) as client:
        for method, path in [
            ("GET", "/"),
            ("GET", "/api/me"),
            ("POST", f"/sign-in?token={team.token}"),
            ("POST", f"/api/trajectories/{team.trajectory_id}/retry-failed"),
            ("GET", "/metrics"),
            ("GET", "/healthz"),
            ("GET", "/js/app.js"),
        ]:
            answer = await client.request(method, path, headers=cookie)
            assert answer.status_code == 421, (method, path, answer.status_code)
            assert answer.json()["error"] == "misdirected"
            assert answer.headers["x-frame-options"] == "DENY"  # still a response of ours, with its headers
        # The node's own names still work, the port aside.
        for host in (f"127.0.0.1:{node.port}", f"localhost:{node.port}", "localhost"):
            assert (await client.get("/healthz", headers={"Host": host})).status_code == 200, host
    assert await raw_upgrade(node.port, evil, team.token, origin) == 421
    assert await raw_upgrade(node.port, f"127.0.0.1:{node.port}", team.token, f"http://127.0.0.1:{node.port}") == 101


@pytest.mark.parametrize("scheme", ["https", "ftp", "ws"])
async def test_an_origin_with_our_host_and_port_but_another_scheme_is_another_origin(
    stack: Stack, team: Team, scheme: str
) -> None:
    node = stack.nodes[0]
    host = f"127.0.0.1:{node.port}"
    assert await raw_upgrade(node.port, host, team.token, f"{scheme}://{host}") == 403
    async with httpx.AsyncClient(base_url=node.http) as client:
        acted = await client.post(
            f"/api/trajectories/{team.trajectory_id}/retry-failed",
            headers={"Cookie": f"gateway_token={team.token}", "Origin": f"{scheme}://{host}"},
        )
    assert acted.status_code == 403 and acted.json()["error"] == "origin_not_allowed"


@pytest.fixture(scope="module")
def any_host_node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    """A node told to answer for any host name (behind a proxy that checks them itself)."""
    with extra_node(stack, "node-any-host", tmp_path_factory, GATEWAY_HOSTS="*") as node:
        yield node


async def test_metrics_stay_loopback_only_under_any_host_name(any_host_node: Process) -> None:
    """With every host name answered, a loopback client naming another host (a rebinding page in a browser on
    the node's machine) still may not scrape: the loopback rule wants this machine's name too."""
    async with httpx.AsyncClient(base_url=any_host_node.http) as client:
        rebound = await client.get("/metrics", headers={"Host": f"evil.example:{any_host_node.port}"})
        assert rebound.status_code == 403 and rebound.json()["error"] == "forbidden"
        assert (await client.get("/healthz", headers={"Host": "evil.example"})).status_code == 200
        assert (await client.get("/metrics")).status_code == 200
