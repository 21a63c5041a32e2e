"""Requests counted by route template, method and status class: every label stays bounded whatever clients send."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Message
from starlette.websockets import WebSocket

from gateway.exposition import exposition
from gateway.web.node.http_figures import HttpFigures, status_class
from gateway.web.node.logs import RequestTimer


async def item(request: Request) -> Response:
    if request.path_params["id"] == 0:
        raise RuntimeError("boom")
    return PlainTextResponse("ok", 200 if request.path_params["id"] < 100 else 404)


async def files(scope: object, receive: object, send: object) -> None:
    await PlainTextResponse("a file")(scope, receive, send)  # type: ignore[arg-type]


async def ws(websocket: WebSocket) -> None:
    if websocket.query_params.get("refuse"):
        await websocket.close(4003)
        return
    await websocket.accept()
    await websocket.send_text("hello")
    await websocket.receive_text()


def _counts(figures: HttpFigures) -> dict[tuple[str, str, str], float]:
    text = exposition([figures]).body.decode()  # type: ignore[union-attr]
    return {
        (s.labels["route"], s.labels["method"], s.labels["status"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "gateway_http_requests_total"
    }


class Site:
    """A tiny app behind the RequestTimer, with an HTTP client and a websocket driver of its own."""

    def __init__(self) -> None:
        self.figures = HttpFigures()
        self.open_counts: dict[tuple[str, str, str], float] = {}  # the counts while a websocket was open
        self.app: ASGIApp = Starlette(
            routes=[
                Route("/items/{id:int}", item, methods=["GET", "POST"]),
                WebSocketRoute("/ws", ws),
                Mount("/static", app=files),
            ],
            middleware=[Middleware(RequestTimer, figures=self.figures)],
        )
        transport = httpx.ASGITransport(app=self.app, raise_app_exceptions=False)
        self.client = httpx.AsyncClient(transport=transport, base_url="http://testserver")

    async def websocket(self, path: str, query: bytes = b"") -> list[Message]:
        """Connect, say "bye" once accepted, and return what the app sent; counts are read while it is open."""
        inbox: asyncio.Queue[Message] = asyncio.Queue()
        inbox.put_nowait({"type": "websocket.connect"})
        sent: list[Message] = []

        async def send(message: Message) -> None:
            sent.append(message)
            if message["type"] == "websocket.send":
                self.open_counts = _counts(self.figures)
                inbox.put_nowait({"type": "websocket.receive", "text": "bye"})
            if message["type"] == "websocket.close":
                inbox.put_nowait({"type": "websocket.disconnect", "code": 1000})

        scope = {"type": "websocket", "path": path, "raw_path": path.encode(), "query_string": query,
                 "headers": [], "root_path": "", "scheme": "ws", "subprotocols": [], "asgi": {"version": "3.0"}}  # fmt: skip
        await asyncio.wait_for(self.app(scope, inbox.get, send), 5)
        return sent


@pytest.fixture
async def site() -> AsyncIterator[Site]:
    site = Site()
    yield site
    await site.client.aclose()


async def test_requests_count_under_their_route_template_method_and_status_class(site: Site) -> None:
    client = site.client
    for i in range(1, 4):
        assert (await client.get(f"/items/{i}")).status_code == 200  # three ids, one series
    assert (await client.get("/items/404")).status_code == 404
    assert (await client.delete("/items/1")).status_code == 405  # the route matched, its method did not
    assert (await client.get("/items/0")).status_code == 500  # the app failed
    assert (await client.get("/static/app.js")).status_code == 200
    assert (await client.get("/nobody/serves/this")).status_code == 404
    assert (await client.request("BREW", "/items/1")).status_code == 405
    assert _counts(site.figures) == {
        ("/items/{id}", "GET", "2xx"): 3,
        ("/items/{id}", "GET", "4xx"): 1,
        ("/items/{id}", "DELETE", "4xx"): 1,
        ("/items/{id}", "GET", "5xx"): 1,
        ("/static/{path}", "GET", "2xx"): 1,
        ("other", "GET", "4xx"): 1,
        ("/items/{id}", "other", "4xx"): 1,
    }


async def test_a_websocket_counts_once_at_its_handshakes_answer(site: Site) -> None:
    sent = await site.websocket("/ws")
    assert [m["type"] for m in sent] == ["websocket.accept", "websocket.send"]
    assert site.open_counts == {("/ws", "GET", "1xx"): 1}  # counted while it was open, not when it ended
    await site.websocket("/ws", b"refuse=1")
    await site.websocket("/elsewhere")
    assert _counts(site.figures) == {("/ws", "GET", "1xx"): 1, ("/ws", "GET", "4xx"): 1, ("other", "GET", "4xx"): 1}


async def test_durations_share_the_counts_labels(site: Site) -> None:
    await site.client.get("/items/1")
    text = exposition([site.figures]).body.decode()  # type: ignore[union-attr]
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    (count,) = [s for s in samples if s.name == "gateway_http_request_duration_seconds_count"]
    assert count.labels == {"route": "/items/{id}", "method": "GET", "status": "2xx"} and count.value == 1
    assert any(s.name == "gateway_http_request_duration_seconds_bucket" and s.labels["le"] == "+Inf" for s in samples)


def test_a_status_outside_http_reads_other() -> None:
    assert [status_class(s) for s in (101, 204, 302, 421, 503, 42, 600)] == [
        "1xx",
        "2xx",
        "3xx",
        "4xx",
        "5xx",
        "other",
        "other",
    ]
