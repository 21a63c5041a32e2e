"""The node's socket layer (gateway.web.server) as HTTP/1.x has it, read by a client this project did not write
(h11) where one fits: HTTP/1.0 closes unless it asks to keep alive, pipelined requests are answered in order, and
a client that leaves is a client gone (counted, nothing logged as an error) while an app's own error is logged."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import struct

import h11
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from gateway.web.node.http_figures import HttpFigures
from gateway.web.node.logs import RequestTimer
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


async def read_answers(
    reader: asyncio.StreamReader, requests: list[h11.Request], bodies: dict[int, bytes] | None = None
) -> list[tuple[int, bytes]]:
    """Each answer to `requests` (sent already, pipelined; `bodies` by index) as h11 parses them: (status, body),
    in order."""
    conn = h11.Connection(h11.CLIENT)
    answers = []
    for i, request in enumerate(requests):
        conn.send(request)  # h11 follows the exchange: the bytes went out already
        if bodies and i in bodies:
            conn.send(h11.Data(data=bodies[i]))
        conn.send(h11.EndOfMessage())
        code, body = 0, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await asyncio.wait_for(reader.read(65536), 30))
            elif isinstance(event, h11.Response):
                code = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                raise AssertionError(f"unexpected {event!r}")
        answers.append((code, body))
        conn.start_next_cycle()
    return answers


def get(target: bytes) -> h11.Request:
    return h11.Request(method="GET", target=target, headers=[("Host", "x")])


# -- HTTP/1.0


async def test_an_http_1_0_request_is_answered_and_closed() -> None:
    async with running(app=Orders()) as node:
        reader, writer = await node.raw(b"GET /a HTTP/1.0\r\n\r\n")
        conn = h11.Connection(h11.CLIENT)  # h11 sends HTTP/1.1 only: it reads the answer to the 1.0 request sent
        conn.send(get("/a"))
        conn.send(h11.EndOfMessage())
        events = []
        while not isinstance(event := conn.next_event(), h11.EndOfMessage):
            if event is h11.NEED_DATA:
                conn.receive_data(await asyncio.wait_for(reader.read(65536), 30))
            else:
                events.append(event)
        response, data = events
        # HTTP/1.1 in the status line, as RFC 9110 (6.2) asks: the highest version the server conforms to.
        assert response.http_version == b"1.1" and response.status_code == 200 and response.reason == b"OK"
        assert (b"connection", b"close") in response.headers and data.data == b"/a "
        assert conn.our_state is h11.MUST_CLOSE
        assert await asyncio.wait_for(reader.read(), 30) == b""  # then closed
        writer.close()


async def test_an_http_1_0_request_asking_to_keep_alive_is_kept_alive() -> None:
    async with running(app=Orders()) as node:
        reader, writer = await node.raw(b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"connection: keep-alive\r\n" in head
        assert await reader.readexactly(3) == b"/a "
        writer.write(b"GET /b HTTP/1.0\r\n\r\n")  # the same connection; this one does not ask
        rest = await asyncio.wait_for(reader.read(), 30)
        assert b"connection: close\r\n" in rest and rest.endswith(b"/b ")
        writer.close()


# -- pipelining


async def test_pipelined_requests_are_answered_in_order() -> None:
    async with running(app=Orders()) as node:
        reader, writer = await node.raw(
            b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody"
            b"GET /third HTTP/1.1\r\nHost: x\r\n\r\n"
        )  # one write: the first is the slowest to answer
        post = h11.Request(method="POST", target="/second", headers=[("Host", "x"), ("Content-Length", "4")])
        answers = await read_answers(reader, [get("/slow"), post, get("/third")], {1: b"body"})
        assert answers == [(200, b"/slow "), (200, b"/second body"), (200, b"/third ")]
        writer.close()


async def test_a_pipelined_body_is_timed_from_its_turn() -> None:
    """The body deadline (0.3 s here) of a request waiting behind a slower one counts from when it is answered:
    until then its body waits unread in the kernel, and the answer before it is not cut."""
    async with running(app=Orders()) as node:
        reader, writer = await node.raw(
            b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\nPOST /second HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n"
        )
        assert await read_answers(reader, [get("/slow")]) == [(200, b"/slow ")]
        writer.write(b"abc")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert status(head) == 200 and await reader.readexactly(11) == b"/second abc"
        writer.close()


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
