"""The bounded HTTP protocol (gateway.web.http), driven with bytes through a fake transport: each limit answers
and closes, and the count of connections waiting for headers comes back down. The first test names every
private part of uvicorn and httptools the protocol leans on, so an upgrade that moves one fails here, loudly."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from typing import Any

import httptools
import pytest
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState

from gateway.web.http import BoundedHttpProtocol, HttpLimits, bounded_protocol
from harness.waiting import eventually

LIMITS = HttpLimits(
    max_request_line_bytes=100,
    max_header_bytes=1000,
    max_headers=5,
    header_timeout=0.2,
    body_timeout=0.2,
    max_pending=2,
)
HAND_OVER_METHODS = [
    "_unset_keepalive_if_required",
    "_should_upgrade",
    "_unsupported_upgrade_warning",
    "handle_websocket_upgrade",
    "send_400_response",
]
PARSER_CALLBACKS = ["on_message_begin", "on_url", "on_header", "on_headers_complete", "on_message_complete"]
INSTANCE_ATTRIBUTES = [
    "timeout_keep_alive_task",
    "parser",
    "cycle",
    "pipeline",
    "loop",
    "server_state",
    "client",
    "logger",
    "transport",
]
CYCLE_ATTRIBUTES = ["response_started", "response_complete", "disconnected", "message_event"]
WEBSOCKET_ATTRIBUTES = ["handshake_initiated", "conn"]
UPGRADE = b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False
        self.aborted = False
        self.eof = False
        self.protocol: asyncio.BaseProtocol | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def write_eof(self) -> None:
        self.eof = True

    def can_write_eof(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol

    def get_protocol(self) -> asyncio.BaseProtocol:
        assert self.protocol is not None
        return self.protocol

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    @property
    def status(self) -> int:
        return int(self.written.split(b" ", 2)[1]) if self.written.startswith(b"HTTP/1.1 ") else 0


async def reading_app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def connect(
    protocol_class: type[BoundedHttpProtocol], server_state: ServerState | None = None
) -> tuple[BoundedHttpProtocol, FakeTransport]:
    config = Config(reading_app, ws="gateway.web.direct:DirectProtocol", log_config=None)
    protocol = protocol_class(config, server_state or ServerState(), {}, asyncio.get_running_loop())
    transport = FakeTransport()
    protocol.connection_made(transport)
    return protocol, transport


async def closed(transport: FakeTransport, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not transport.closed and not transport.eof:
        assert asyncio.get_running_loop().time() < deadline, f"not closed: {transport.written!r}"
        await asyncio.sleep(0.01)


async def test_the_private_parts_of_uvicorn_it_relies_on_are_there() -> None:
    version = f"uvicorn {uvicorn.__version__} (pyproject.toml pins the range gateway.web.http was tested with)"
    for name in HAND_OVER_METHODS + PARSER_CALLBACKS:
        assert callable(getattr(HttpToolsProtocol, name, None)), f"{version}: HttpToolsProtocol.{name} is gone"
    parameters = list(inspect.signature(HttpToolsProtocol.__init__).parameters)
    assert parameters[:5] == ["self", "config", "server_state", "app_state", "_loop"], (
        f"{version}: __init__ is now {parameters}"
    )
    protocol, _ = connect(bounded_protocol(LIMITS))
    for name in INSTANCE_ATTRIBUTES:
        assert hasattr(protocol, name), f"{version}: HttpToolsProtocol instances no longer have .{name}"
    protocol.on_message_begin()
    assert isinstance(protocol.url, bytes) and isinstance(protocol.headers, list), (
        f"{version}: .url and .headers changed"
    )
    cycle_init = inspect.getsource(RequestResponseCycle.__init__)
    for name in CYCLE_ATTRIBUTES:
        assert f"self.{name} =" in cycle_init, f"{version}: RequestResponseCycle no longer sets .{name}"
    websocket_init = inspect.getsource(WebSocketsSansIOProtocol.__init__)
    for name in WEBSOCKET_ATTRIBUTES:
        assert f"self.{name} =" in websocket_init, f"{version}: WebSocketsSansIOProtocol no longer sets .{name}"


def test_httptools_hands_back_what_a_callback_raised() -> None:
    class Refusing:
        def on_url(self, url: bytes) -> None:
            raise LookupError("refused")

    with pytest.raises(httptools.HttpParserError) as info:
        httptools.HttpRequestParser(Refusing()).feed_data(b"GET / HTTP/1.1\r\n")
    assert isinstance(info.value.__context__, LookupError), (
        f"httptools {httptools.__version__} no longer chains the callback's error"
    )


async def test_a_normal_request_is_served_and_leaves_nothing_waiting() -> None:
    protocol_class = bounded_protocol(LIMITS)
    protocol, transport = connect(protocol_class)
    assert protocol_class.waiting.count == 1
    protocol.data_received(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
    assert protocol_class.waiting.count == 0
    deadline = asyncio.get_running_loop().time() + 10
    while not transport.written.endswith(b"ok"):
        assert asyncio.get_running_loop().time() < deadline, transport.written
        await asyncio.sleep(0.01)
    assert transport.status == 200 and protocol.header_deadline is None and protocol.body_deadline is None
    protocol.connection_lost(None)
    assert protocol_class.waiting.count == 0


@pytest.mark.parametrize(
    ("request_bytes", "status", "code"),
    [
        (b"GET /" + b"a" * 200 + b" HTTP/1.1\r\n", 414, b"uri_too_long"),
        (b"GET / HTTP/1.1\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(10)), 431, b"too_many_headers"),
        (b"GET / HTTP/1.1\r\nX-A: " + b"a" * 600 + b"\r\nX-B: " + b"b" * 600 + b"\r\n", 431, b"headers_too_large"),
        (b"GET / HTTP/1.1\r\nX-Never-Ends: " + b"a" * 2000, 431, b"headers_too_large"),
    ],
    ids=["long-url", "too-many-headers", "large-headers", "one-header-never-ends"],
)
async def test_a_request_over_a_limit_is_answered_and_closed(request_bytes: bytes, status: int, code: bytes) -> None:
    protocol_class = bounded_protocol(LIMITS)
    protocol, transport = connect(protocol_class)
    protocol.data_received(request_bytes)
    assert transport.status == status and code in transport.written and transport.eof, transport.written
    protocol.data_received(b"\r\n\r\n")  # whatever follows is dropped
    assert transport.written.count(b"HTTP/1.1") == 1
    protocol.connection_lost(None)
    assert protocol_class.waiting.count == 0


async def test_an_answer_its_reader_takes_nothing_of_is_cut_at_the_send_stall() -> None:
    protocol, transport = connect(bounded_protocol(dataclasses.replace(LIMITS, send_stall=0.2)))
    protocol.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    protocol.pause_writing()  # the transport's buffer is full: the reader takes nothing
    protocol.resume_writing()  # it took some: the deadline is off
    assert protocol.send_deadline is None
    protocol.pause_writing()
    await eventually(lambda: transport.aborted, "the connection whose reader takes nothing to be cut")
    protocol.connection_lost(None)
    assert protocol.send_deadline is None


async def test_headers_not_complete_in_time_get_408() -> None:
    protocol, transport = connect(bounded_protocol(LIMITS))
    protocol.data_received(b"GET / HTTP/1.1\r\nX-Slow: a")
    await closed(transport)
    assert transport.status == 408 and b"request headers not complete" in transport.written


async def test_a_body_not_complete_in_time_gets_408_and_the_app_a_disconnect() -> None:
    protocol, transport = connect(bounded_protocol(LIMITS))
    protocol.data_received(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
    await closed(transport)
    assert transport.status == 408 and b"request body not complete" in transport.written
    assert protocol.cycle.disconnected


async def test_a_kept_alive_connection_idle_then_trickling_gets_408() -> None:
    protocol, transport = connect(bounded_protocol(LIMITS))
    protocol.data_received(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await eventually(lambda: protocol.timeout_keep_alive_task is not None, "the keep-alive timer", timeout=10)
    protocol.data_received(b"\r\n")  # not even a request yet
    transport.written = b""
    await closed(transport)
    assert transport.status == 408


async def test_past_the_pending_cap_a_new_connection_gets_503_at_once() -> None:
    protocol_class = bounded_protocol(LIMITS)
    server_state = ServerState()
    waiting = [connect(protocol_class, server_state) for _ in range(LIMITS.max_pending)]
    _, transport = connect(protocol_class, server_state)
    assert transport.status == 503 and transport.closed and b"retry-after: " in transport.written
    assert protocol_class.waiting.count == LIMITS.max_pending
    for protocol, _ in waiting:
        protocol.connection_lost(None)
    assert protocol_class.waiting.count == 0
    _, transport = connect(protocol_class, server_state)
    assert not transport.written


async def test_a_websocket_upgrade_leaves_the_count_and_its_timers() -> None:
    protocol_class = bounded_protocol(LIMITS)
    protocol, transport = connect(protocol_class)
    protocol.data_received(UPGRADE + b"\r\n")
    assert transport.protocol is not None and transport.protocol is not protocol and not transport.closed
    assert protocol_class.waiting.count == 0 and protocol.header_deadline is None and protocol.body_deadline is None


@pytest.mark.parametrize(
    ("extra", "status"),
    [(b"X-Long: " + b"a" * (9 << 10) + b"\r\n", 431), (b"Content-Length: 5\r\n", 400)],
    ids=["header-line-too-long-for-websockets", "a-body"],
)
async def test_an_upgrade_websockets_refuses_is_answered_and_closed(extra: bytes, status: int) -> None:
    protocol, transport = connect(bounded_protocol(HttpLimits(max_header_bytes=64 << 10)))
    protocol.data_received(UPGRADE + extra + b"\r\n")
    assert transport.status == status and transport.closed, transport.written
