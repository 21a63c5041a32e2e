"""The node's own socket layer (gateway.web.server) on real sockets: what a client sees of each bound, of a
plain request served by the ASGI app, and of a websocket handshake answered by the node's own code, read with
raw bytes and the `websockets` client."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httptools
import pytest
import websockets
from starlette.responses import FileResponse
from starlette.types import Receive, Scope, Send

from gateway.core.admission import Admission
from gateway.core.wsframe import OP_TEXT, build
from gateway.credentials import VerifiedTokens
from gateway.web.node.leaving import Leaving
from gateway.web.server.limits import HttpLimits
from gateway.web.server.serve import Server
from gateway.web.server.served import Served
from gateway.web.server.upgrade import Gone, Opening
from gateway.web.websocket.handshake_gate import HandshakeGate
from harness.waiting import eventually

LIMITS = HttpLimits(
    max_request_line_bytes=100,
    max_header_bytes=1000,
    max_headers=12,
    header_timeout=0.3,
    body_timeout=0.3,
    max_pending=2,
    send_stall=0.3,
)
UPGRADE = (
    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
)
SECRET = "s" * 40


class App:
    """A tiny ASGI app: /echo answers the body it read, /big a large body, anything else `ok`; its lifespan is
    recorded."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.disconnected = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                self.events.append(message["type"])
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        body = b""
        while scope["path"] != "/early":  # /early answers without reading the body
            message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnected.set()
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["path"] == "/stream":  # no length: chunked on HTTP/1.1
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ab", "more_body": True})
            await send({"type": "http.response.body", "body": b"cd"})
            return
        if scope["path"] == "/big":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            for _ in range(200):
                await send({"type": "http.response.body", "body": b"x" * (1 << 20), "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        answer = body if scope["path"] == "/echo" else b"ok"
        headers = [(b"content-length", b"%d" % len(answer)), (b"x-client", scope["client"][0].encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})


class Node:
    """A server on a free loopback port (and a health port), with `opened` the handshakes its opener saw."""

    def __init__(self, served: Served, server: Server, port: int, health_port: int) -> None:
        self.served, self.server, self.port, self.health_port = served, server, port, health_port

    async def raw(self, data: bytes, port: int | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port or self.port)
        writer.write(data)
        return reader, writer

    async def exchange(self, data: bytes, port: int | None = None) -> bytes:
        """Send `data` and read until the server closes."""
        reader, writer = await self.raw(data, port)
        try:
            return await asyncio.wait_for(reader.read(), 30)
        finally:
            writer.close()


def _socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


@contextlib.asynccontextmanager
async def running(**options: Any) -> AsyncIterator[Node]:
    main, health = _socket(), _socket()
    served = Served(app=options.pop("app", App()), limits=options.pop("limits", LIMITS), **options)
    served.health_port = health.getsockname()[1]
    server = Server(served, leaving=Leaving(), drain=0.3, graceful_shutdown=5)
    task = asyncio.create_task(server.serve([main, health]))
    await eventually(lambda: server.started or task.done(), "the server to start", timeout=30)
    try:
        yield Node(served, server, main.getsockname()[1], health.getsockname()[1])
    finally:
        server.stop()
        await asyncio.wait_for(task, 30)


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


async def echo_opener(opening: Opening) -> None:
    """Accepts every handshake and echoes what the client says as text."""
    holder: list[Any] = []
    link = opening.accept(lambda data: holder[0].transport.write(build(OP_TEXT, _text(data))), lambda: None, _Writer())
    holder.append(link)


def _text(data: str | bytes) -> bytes:
    return data.encode() if isinstance(data, str) else data


class _Writer:
    def flush(self) -> None:
        pass

    def paused(self) -> None:
        pass


# -- plain HTTP


async def test_requests_are_served_by_the_app_on_one_kept_alive_connection() -> None:
    async with running() as node:
        reader, writer = await node.raw(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        head = await reader.readuntil(b"\r\n\r\n")
        assert status(head) == 200 and b"content-length: 5" in head and b"date: " in head
        assert await reader.readexactly(5) == b"hello"
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        rest = await asyncio.wait_for(reader.read(), 30)  # both answered in order, then closed
        assert rest.count(b"HTTP/1.1 200") == 2 and rest.endswith(b"ok")
        writer.close()
        await eventually(lambda: not node.served.connections and node.served.waiting.count == 0, "nothing open")
        assert node.served.app.events == ["lifespan.startup"]
    assert node.served.app.events == ["lifespan.startup", "lifespan.shutdown"]


async def test_a_streamed_file_is_served_while_starlette_listens_for_a_disconnect(tmp_path: Path) -> None:
    """Starlette's FileResponse streams in chunks and meanwhile awaits `receive` for a disconnect: once the body
    was read, `receive` waits (a server that answered it again at once kept the loop spinning, the file unsent)."""
    page = tmp_path / "index.html"
    page.write_bytes(b"<p>" + b"x" * 200_000 + b"</p>")

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            await FileResponse(page)(scope, receive, send)
        elif scope["type"] == "lifespan":
            await App()(scope, receive, send)

    async with running(app=app) as node:
        reader, writer = await node.raw(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert status(head) == 200
        assert b"content-length: %d" % page.stat().st_size in head
        assert (await asyncio.wait_for(reader.readexactly(page.stat().st_size), 30)).endswith(b"x</p>")
        writer.write(b"GET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")  # kept alive: a second one
        assert (await asyncio.wait_for(reader.read(), 30)).endswith(b"x</p>")
        writer.close()


async def test_an_http_1_0_client_gets_a_body_without_chunks_ended_by_the_close() -> None:
    async with running() as node:
        answer = await node.exchange(b"GET /stream HTTP/1.0\r\n\r\n")
        head, _, body = answer.partition(b"\r\n\r\n")
        assert status(head) == 200 and b"chunked" not in head and body == b"abcd"
        chunked = await node.exchange(b"GET /stream HTTP/1.1\r\nConnection: close\r\n\r\n")
        assert b"transfer-encoding: chunked" in chunked and chunked.endswith(b"2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n")


async def test_a_client_expecting_100_continue_is_asked_for_its_body() -> None:
    async with running() as node:
        reader, writer = await node.raw(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
        )
        assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30) == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"hello")
        answer = await asyncio.wait_for(reader.read(), 30)
        assert status(answer) == 200 and answer.endswith(b"hello")
        writer.close()


async def test_an_answer_given_before_the_body_ended_reaches_the_client_and_the_connection_goes_on() -> None:
    async with running(limits=dataclasses.replace(LIMITS, body_timeout=30)) as node:
        reader, writer = await node.raw(b"POST /early HTTP/1.1\r\nHost: x\r\nContent-Length: 4000000\r\n\r\n")
        for _ in range(40):  # 4 MB the app never reads, sent while its answer is out
            writer.write(b" " * 100_000)
            await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        assert status(head) == 200
        assert await reader.readexactly(2) == b"ok"
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")  # kept alive once the body ended
        assert (await asyncio.wait_for(reader.read(), 30)).endswith(b"ok")
        writer.close()


async def test_a_chunked_request_and_a_response_without_length() -> None:
    async with running() as node:
        answer = await node.exchange(
            b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
        )
        assert status(answer) == 200 and answer.endswith(b"abcde")


@pytest.mark.parametrize(
    ("request_bytes", "code", "error"),
    [
        (b"GET /" + b"a" * 200 + b" HTTP/1.1\r\n", 414, b"uri_too_long"),
        (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(20)), 431, b"too_many_headers"),
        (b"GET / HTTP/1.1\r\nX-A: " + b"a" * 600 + b"\r\nX-B: " + b"b" * 600 + b"\r\n", 431, b"headers_too_large"),
        (b"GET / HTTP/1.1\r\nX-Never-Ends: " + b"a" * 2000, 431, b"headers_too_large"),
        (b"NOT HTTP AT ALL\r\n\r\n", 400, b"bad_request"),
    ],
    ids=["long-url", "too-many-headers", "large-headers", "one-header-never-ends", "garbage"],
)
async def test_a_request_over_a_limit_is_answered_and_closed(request_bytes: bytes, code: int, error: bytes) -> None:
    # The header deadline well past the answer: on a busy machine 0.3 s passed before the request was read (408).
    async with running(limits=dataclasses.replace(LIMITS, header_timeout=30)) as node:
        answer = await node.exchange(request_bytes)
        assert status(answer) == code and error in answer and answer.count(b"HTTP/1.1") == 1, answer
        await eventually(lambda: node.served.waiting.count == 0, "the pending count back to 0")


async def test_headers_trickling_past_the_deadline_get_408() -> None:
    async with running() as node:
        reader, writer = await node.raw(b"GET / HTTP/1.1\r\nX-Slow: a")
        answer = await asyncio.wait_for(reader.read(), 30)
        assert status(answer) == 408 and b"request headers not complete" in answer
        writer.close()


async def test_a_kept_alive_connection_idle_then_trickling_gets_408() -> None:
    async with running(limits=dataclasses.replace(LIMITS, keep_alive=30)) as node:
        reader, writer = await node.raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status(await reader.readuntil(b"ok")) == 200
        writer.write(b"GET / HT")
        answer = await asyncio.wait_for(reader.read(), 30)
        assert status(answer) == 408
        writer.close()


async def test_a_body_not_complete_in_time_gets_408_and_the_app_a_disconnect() -> None:
    app = App()
    async with running(app=app) as node:
        answer = await node.exchange(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
        assert status(answer) == 408 and b"request body not complete" in answer
        await asyncio.wait_for(app.disconnected.wait(), 30)


async def test_past_the_pending_cap_a_new_connection_gets_503_at_once() -> None:
    async with running() as node:
        held = [await node.raw(b"") for _ in range(LIMITS.max_pending)]
        await eventually(lambda: node.served.waiting.count == LIMITS.max_pending, "the pending connections")
        answer = await node.exchange(b"")
        assert status(answer) == 503 and b"retry-after: " in answer
        for _, writer in held:
            writer.close()
        await eventually(lambda: node.served.waiting.count == 0, "the pending count back to 0")
        assert status(await node.exchange(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")) == 200


async def test_an_answer_its_reader_takes_nothing_of_is_cut_at_the_send_stall() -> None:
    async with running() as node:
        reader, writer = await node.raw(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")  # and never read
        await eventually(lambda: not node.served.connections, "the stalled connection to be cut", timeout=30)
        writer.close()


async def test_the_health_port_takes_no_websocket_and_serves_http() -> None:
    async with running(opener=echo_opener) as node:
        answer = await node.exchange(UPGRADE + b"\r\n", node.health_port)
        assert status(answer) == 404 and b"health port" in answer
        ok = await node.exchange(b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", node.health_port)
        assert status(ok) == 200


async def test_an_upgrade_to_another_protocol_is_served_as_plain_http() -> None:
    async with running(opener=echo_opener) as node:
        answer = await node.exchange(b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: Upgrade, close\r\n\r\n")
        assert status(answer) == 200 and answer.count(b"HTTP/1.1") == 1 and answer.endswith(b"ok")


async def test_a_trusted_proxy_names_the_client() -> None:
    async with running() as node:
        answer = await node.exchange(b"GET / HTTP/1.1\r\nX-Forwarded-For: 10.1.2.3\r\nConnection: close\r\n\r\n")
        assert b"x-client: 10.1.2.3" in answer


# -- websockets


async def test_a_websocket_is_answered_by_the_opener_and_handed_to_a_link() -> None:
    async with running(opener=echo_opener) as node:
        async with websockets.connect(f"ws://127.0.0.1:{node.port}/ws") as ws:
            await ws.send("hello")
            assert await asyncio.wait_for(ws.recv(), 30) == "hello"
            assert ws.subprotocol is None and len(node.served.links) == 1
            assert not node.served.connections and node.served.waiting.count == 0  # the HTTP protocol let go
        await eventually(lambda: not node.served.links, "the link to be forgotten")


async def test_msgpack_is_the_subprotocol_when_offered() -> None:
    async with running(opener=echo_opener) as node:
        async with websockets.connect(f"ws://127.0.0.1:{node.port}/ws", subprotocols=["json", "msgpack"]) as ws:
            assert ws.subprotocol == "msgpack"
        async with websockets.connect(f"ws://127.0.0.1:{node.port}/ws", subprotocols=["json"]) as ws:
            assert ws.subprotocol is None  # JSON, the default: no subprotocol named in the answer


@pytest.mark.parametrize("compression", [True, False])
async def test_permessage_deflate_is_negotiated_as_the_node_shares_it(compression: bool) -> None:
    async with running(opener=echo_opener, compression=compression) as node:
        async with websockets.connect(f"ws://127.0.0.1:{node.port}/ws", compression="deflate") as ws:
            assert ws.response is not None
            answered = ws.response.headers.get("Sec-WebSocket-Extensions")
            if compression:
                assert answered is not None and "server_no_context_takeover" in answered
                assert "client_no_context_takeover" in answered
            else:
                assert answered is None
            await ws.send("x" * 1000)  # compressed by the client, inflated by the link, echoed plain
            assert await asyncio.wait_for(ws.recv(), 30) == "x" * 1000


async def test_a_handshake_without_a_token_is_refused_401_before_the_opener() -> None:
    seen: list[Opening] = []

    async def opener(opening: Opening) -> None:
        seen.append(opening)
        await echo_opener(opening)

    gate = HandshakeGate(Admission(100.0, 1.0), VerifiedTokens(SECRET), 3600.0)
    async with running(opener=opener, gate=gate) as node:
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(f"ws://127.0.0.1:{node.port}/ws")
        assert refused.value.response.status_code == 401 and b"missing token" in refused.value.response.body
        assert not seen


async def test_the_opener_may_refuse_with_its_own_answer() -> None:
    async def opener(opening: Opening) -> None:
        assert opening.scope["path"] == "/ws" and opening.scope["query_string"] == b"a=1"
        opening.refuse(429, json.dumps({"error": "too_many_connections"}).encode(), [(b"x-why", b"limit")])

    async with running(opener=opener) as node:
        with pytest.raises(websockets.InvalidStatus) as refused:
            await websockets.connect(f"ws://127.0.0.1:{node.port}/ws?a=1")
        response = refused.value.response
        assert response.status_code == 429 and response.headers["x-why"] == "limit"
        assert json.loads(response.body) == {"error": "too_many_connections"}


@pytest.mark.parametrize(
    ("request_bytes", "code"),
    [
        (UPGRADE.replace(b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", b"") + b"\r\n", 400),
        (UPGRADE.replace(b"GET /ws", b"GET /elsewhere") + b"\r\n", 404),
        (UPGRADE.replace(b"Version: 13", b"Version: 8") + b"\r\n", 400),
        (UPGRADE + b"Content-Length: 5\r\n\r\nhello", 400),
        (UPGRADE.replace(b"GET /ws", b"POST /ws") + b"\r\n", 400),
    ],
    ids=["no-key", "another-path", "old-version", "a-body", "not-a-get"],
)
async def test_a_handshake_websockets_refuses_is_answered_and_closed(request_bytes: bytes, code: int) -> None:
    async with running(opener=echo_opener) as node:
        answer = await node.exchange(request_bytes)
        assert status(answer) == code, answer
        assert not node.served.links


async def test_what_the_client_sends_before_its_answer_reaches_the_link_in_order() -> None:
    decide = asyncio.Event()
    got: list[str | bytes] = []

    async def opener(opening: Opening) -> None:
        await decide.wait()  # as the node's does, awaiting Redis
        opening.accept(got.append, lambda: None, _Writer())

    async with running(opener=opener) as node:
        masked = bytes([0x81, 0x82, 0, 0, 0, 0]) + b"hi"  # a text frame "hi" with a zero mask
        reader, writer = await node.raw(UPGRADE + b"\r\n" + masked)
        await eventually(lambda: node.served.tasks, "the handshake to wait for its opener")
        writer.write(masked)
        decide.set()
        assert status(await reader.readuntil(b"\r\n\r\n")) == 101
        await eventually(lambda: got == ["hi", "hi"], "both messages, in order")
        writer.close()


async def test_a_client_gone_before_its_answer_is_told_nothing() -> None:
    decide = asyncio.Event()
    outcome: list[str] = []

    async def opener(opening: Opening) -> None:
        await decide.wait()
        try:
            opening.accept(lambda data: None, lambda: None, _Writer())
        except Exception as exc:
            outcome.append(type(exc).__name__)
            raise

    async with running(opener=opener) as node:
        _, writer = await node.raw(UPGRADE + b"\r\n")
        await eventually(lambda: node.served.tasks, "the handshake to wait for its opener")
        writer.close()
        await eventually(lambda: not node.served.connections, "the connection to be gone")
        decide.set()
        await eventually(lambda: outcome == ["Gone"], "the opener to be told")


async def test_a_client_gone_before_its_answer_is_no_error_of_the_node(caplog: pytest.LogCaptureFixture) -> None:
    """The node's opener takes `Gone` as the end of the story (gateway.web.websocket.opening): in a storm that outruns
    the node, each client that gave up waiting logged an ERROR saying the handshake was neither accepted nor refused."""
    decide = asyncio.Event()

    async def opener(opening: Opening) -> None:
        await decide.wait()
        with contextlib.suppress(Gone):
            opening.accept(lambda data: None, lambda: None, _Writer())

    async with running(opener=opener) as node:
        _, writer = await node.raw(UPGRADE + b"\r\n")
        await eventually(lambda: node.served.tasks, "the handshake to wait for its opener")
        writer.close()
        await eventually(lambda: not node.served.connections, "the connection to be gone")
        decide.set()
        await eventually(lambda: not node.served.tasks, "the opener to be done")
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


async def test_a_handshake_arriving_while_the_node_stops_is_told_to_retry() -> None:
    async with running(opener=echo_opener) as node:
        node.served.stopping = True  # as `shutdown` marks it, before the listening sockets are closed
        answer = await node.exchange(UPGRADE + b"\r\n")
        assert status(answer) == 503 and b"retry-after: 1" in answer and b"stopping" in answer
        assert not node.served.links


async def test_sigterm_drains_then_closes_websockets_with_1012_and_a_hint() -> None:
    async with running(opener=echo_opener) as node:
        async with websockets.connect(f"ws://127.0.0.1:{node.port}/ws") as ws:
            node.server.handle_signal(signal.SIGTERM)
            assert node.server.leaving.since is not None  # /readyz says 503 from now on
            answer = await node.exchange(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
            assert status(answer) == 200  # still serving during the drain
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
            assert "retry" in closed.value.rcvd.reason
        await eventually(lambda: node.server.stopped_by == signal.SIGTERM, "the server to stop")


def test_httptools_hands_back_what_a_callback_raised() -> None:
    """The bounds raise in httptools' callbacks (gateway.web.server.limits.OverLimit) and read the error back as
    the context of httptools' own."""

    class Refusing:
        def on_url(self, url: bytes) -> None:
            raise LookupError("refused")

    with pytest.raises(httptools.HttpParserError) as info:
        httptools.HttpRequestParser(Refusing()).feed_data(b"GET / HTTP/1.1\r\n")
    assert isinstance(info.value.__context__, LookupError), (
        f"httptools {httptools.__version__} no longer chains the callback's error"
    )
