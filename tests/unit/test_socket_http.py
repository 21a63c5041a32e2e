"""The node's socket layer (gateway.web.server): a client that leaves is a client gone (counted, nothing logged as
an error) while an app's own error is logged."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import struct

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gateway.web.http_figures import HttpFigures
from gateway.web.logs import RequestTimer
from harness.waiting import eventually
from tests.unit.test_socket_layer import LIMITS, App, running, status

SLOW = 1.0  # seconds /slow takes: longer than LIMITS.body_timeout


class Orders:
    """An app whose answer names the request: its path and body; /slow answers after SLOW seconds, /fail raises
    once its client has left."""

    def __init__(self) -> None:
        self.failed = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await App()(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/fail":  # waits for its client to leave, then fails
            while (await receive())["type"] != "http.disconnect":
                pass
            self.failed.set()
            raise ValueError("an app's own error, after its client left")
        if scope["path"] == "/slow":
            await asyncio.sleep(SLOW)
        answer = scope["path"].encode() + b" " + body
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(answer))]}
        )
        await send({"type": "http.response.body", "body": answer})


# -- a client gone


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]


async def test_an_answer_waiting_for_room_when_its_reader_is_cut_is_no_app_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """/big sends 200 MB to a reader that takes nothing: its send waits for room in the socket until the send
    stall cuts it. The send wakes to a closed socket and drops what it had (a write there raised into the app)."""
    gone: list[int] = []
    async with running(client_gone=lambda: gone.append(1)) as node:
        _, writer = await node.raw(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")  # and never read
        await eventually(lambda: not node.served.connections, "the stalled connection to be cut", timeout=30)
        await eventually(lambda: not node.served.tasks, "the answer's task to end", timeout=30)
        writer.close()
    assert gone == [1] and errors(caplog) == []


async def test_a_reader_that_resets_mid_answer_is_no_app_error(caplog: pytest.LogCaptureFixture) -> None:
    gone: list[int] = []
    limits = dataclasses.replace(LIMITS, send_stall=30)
    async with running(client_gone=lambda: gone.append(1), limits=limits) as node:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(s, ("127.0.0.1", node.port))
        await loop.sock_sendall(s, b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status(await asyncio.wait_for(loop.sock_recv(s, 64), 30)) == 200
        await eventually(lambda: any(not c.flow.writable.is_set() for c in node.served.connections), "a full socket")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # a reset, as a closed tab
        await eventually(lambda: not node.served.tasks and not node.served.connections, "the answer to end")
    assert gone == [1] and errors(caplog) == []


async def test_an_apps_own_error_after_its_client_left_is_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    app = Orders()
    async with running(app=app) as node:
        _, writer = await node.raw(b"GET /fail HTTP/1.1\r\nHost: x\r\n\r\n")
        await eventually(lambda: node.served.tasks, "the request to be answered")
        writer.close()
        await asyncio.wait_for(app.failed.wait(), 30)
        await eventually(lambda: not node.served.tasks, "the answer's task to end")
    logged = [r for r in caplog.records if r.getMessage() == "Exception in ASGI application"]
    assert len(logged) == 1 and logged[0].exc_info and isinstance(logged[0].exc_info[1], ValueError)


async def test_a_body_read_after_its_client_left_is_no_server_error(caplog: pytest.LogCaptureFixture) -> None:
    """A handler that reads its body and does not catch Starlette's ClientDisconnect (`@endpoint` does): the
    node's outermost middleware takes it for what it is."""
    read: list[str] = []

    async def reading(request: Request) -> Response:
        read.append("started")
        return Response(await request.body())

    figures = HttpFigures()
    app = Starlette(
        routes=[Route("/read", reading, methods=["POST"])], middleware=[Middleware(RequestTimer, figures=figures)]
    )
    async with running(app=app) as node:
        _, writer = await node.raw(b"POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
        await eventually(lambda: read, "the handler to read")
        writer.close()
        await eventually(lambda: figures.requests, "the request to be counted")
    assert list(figures.requests) == [("/read", "POST", "4xx")] and errors(caplog) == []
