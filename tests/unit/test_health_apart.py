"""The health port from a thread of its own (gateway.web.server.own_thread, gateway.web.node.health_port): /healthz
answers while the node's loop is busy and says so once that loop has stopped running; /readyz answers from the
node's last check while it is fresh; the rest is handed to the node's loop."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway.web.node.health_port import HealthFirst
from gateway.web.node.http_figures import HttpFigures
from gateway.web.node.leaving import Leaving
from gateway.web.node.loop_lag import LoopLag
from gateway.web.node.metrics import READY_FRESH, STALLED, Readiness, healthz
from gateway.web.server.serve import Server
from gateway.web.server.served import Served
from harness.waiting import eventually


async def readyz(request: Request) -> JSONResponse:
    """The node's own /readyz, on its loop: it says which thread answered."""
    return JSONResponse({"thread": threading.current_thread().name})


def node_app() -> Starlette:
    """A node's app as the health port sees it: its routes for /healthz and /readyz, its runtime's counts."""
    app = Starlette(routes=[Route("/healthz", healthz), Route("/readyz", readyz)])
    lag = LoopLag(None)
    lag.ticked = time.monotonic()
    node = SimpleNamespace(connections={1: None, 2: None}, hub=SimpleNamespace(subscribers={"trajectory:1": None}))
    app.state.runtime = SimpleNamespace(node=node, loop_lag=lag)
    app.state.http_figures = HttpFigures()
    app.state.readiness = Readiness()  # no check yet
    app.state.leaving = Leaving()
    return app


def _socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


@pytest.fixture
async def node() -> AsyncIterator[tuple[Starlette, int]]:
    """The app served on a main port and a health port, the health port apart; yields the app and that port."""
    app = node_app()
    main, health = _socket(), _socket()
    served = Served(app=app, health_port=health.getsockname()[1])
    served.health_app = lambda loop: HealthFirst(app, loop, ("*",))
    server = Server(served, signals=False, graceful_shutdown=5)
    task = asyncio.create_task(server.serve([main, health]))
    await eventually(lambda: server.started or task.done(), "the server to start", timeout=30)
    try:
        yield app, health.getsockname()[1]
    finally:
        server.stop()
        await asyncio.wait_for(task, 30)
    assert server.apart is not None and server.apart.failed is None


def get(port: int, path: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read()), dict(refused.headers)


def asked_while_busy(port: int, path: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    """`path` asked while the node's loop (this one) is busy: it runs nothing else until the answer came, or for
    30 s. Fails if the answer waited for the loop."""
    answered: list[tuple[int, dict[str, Any], dict[str, str]]] = []
    done = threading.Event()

    def ask() -> None:
        answered.append(get(port, path))
        done.set()

    threading.Thread(target=ask).start()
    deadline = time.monotonic() + 30
    while not done.is_set() and time.monotonic() < deadline:
        time.sleep(0.01)  # the node's loop, busy
    assert done.is_set(), f"{path} waited for the node's loop"
    return answered[0]


async def test_healthz_answers_while_the_node_loop_is_busy(node: tuple[Starlette, int]) -> None:
    """A storm keeps the node's loop busy: the liveness check is answered meanwhile, not after."""
    _, port = node
    status, body, headers = asked_while_busy(port, "/healthz")
    assert (status, body) == (200, {"ok": True, "connections": 2, "channels": 1})
    assert headers["x-content-type-options"] == "nosniff"  # the app's headers, as on its own loop


async def test_readyz_answers_ready_from_the_node_last_check_while_it_is_fresh(node: tuple[Starlette, int]) -> None:
    app, port = node
    checks: Readiness = app.state.readiness
    checks.ready_at = time.monotonic()
    assert asked_while_busy(port, "/readyz")[:2] == (200, {"ready": True, "problems": []})
    checks.ready_at = time.monotonic() - READY_FRESH - 1  # too old: the node's loop is asked, as before
    status, body, _ = await asyncio.to_thread(get, port, "/readyz")
    assert (status, body) == (200, {"thread": "MainThread"})
    # A problem found is asked again there: a node just started (subscribing to Redis) is not held out for a second.
    checks.ready_at = None  # the last check found a problem (its Redis subscription on its way)
    status, body, _ = await asyncio.to_thread(get, port, "/readyz")
    assert (status, body) == (200, {"thread": "MainThread"})


async def test_readyz_says_at_once_that_the_node_is_leaving(node: tuple[Starlette, int]) -> None:
    app, port = node
    app.state.leaving.since = time.monotonic()  # SIGTERM: the drain
    assert asked_while_busy(port, "/readyz")[:2] == (503, {"ready": False, "problems": ["shutting down"]})


async def test_healthz_says_when_the_node_loop_has_not_run(node: tuple[Starlette, int]) -> None:
    app, port = node
    app.state.runtime.loop_lag.ticked = time.monotonic() - STALLED - 2
    status, body, _ = await asyncio.to_thread(get, port, "/healthz")
    assert status == 503
    assert body["ok"] is False and body["problem"].startswith("the event loop has not run for 7.")


async def test_the_rest_is_answered_on_the_node_loop_and_healthz_counted_there(node: tuple[Starlette, int]) -> None:
    app, port = node
    status, body, _ = await asyncio.to_thread(get, port, "/readyz")  # no check of the node's yet
    assert (status, body) == (200, {"thread": "MainThread"})
    await asyncio.to_thread(get, port, "/healthz")
    figures: HttpFigures = app.state.http_figures
    await eventually(lambda: ("/healthz", "GET", "2xx") in figures.requests, "/healthz counted", timeout=30)
