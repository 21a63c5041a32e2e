"""The node's HTTP protocol: uvicorn's httptools protocol, with bounds on what a request costs before the app sees it.

uvicorn's httptools protocol keeps every header line it is sent and never times out an unfinished request:
one socket sending header lines that never end grew a node by some 350 MiB before any authentication. Here a
request is answered and its connection closed

- 414 when its target (the URL) passes `max_request_line_bytes`,
- 431 past `max_headers` header lines or `max_header_bytes` of them, counted as bytes arrive (so one header
  that never ends is caught too),
- 408 when its headers are not complete `header_timeout` after the connection opened (or after the request's
  first byte, on a kept-alive connection), or its body `body_timeout` after the headers,

and while `max_pending` connections are still waiting for their headers, a new connection is told 503 and
closed at once. The health port (GATEWAY_HEALTH_PORT) has a bound of its own instead: at most
`health_limit` connections open there at once, idle or not; nothing there counts against the main port's,
and it takes no websocket (404). A websocket's upgrade request is plain HTTP until its headers complete, so
the same bounds hold for it. Then it passes gateway.web.handshake_gate (a valid token, then the admission at
its user's share), uvicorn hands the socket to gateway.web.direct and the app answers the handshake at once
(without awaiting the client); a request that websockets' stricter parser refuses is answered and closed
here, as uvicorn would leave it open with no deadline.

This leans on private parts of uvicorn: tests/unit/test_http_protocol.py names each one, and pyproject.toml
pins the uvicorn versions it was tested with.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, ClassVar

import httptools
import msgspec
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from ..config import Settings
from .handshake_gate import HandshakeGate

log = logging.getLogger(__name__)

# After answering a refusal the connection stays open this long, reading and dropping whatever the client is
# still sending: closing a socket with unread input resets it, and the client could lose the answer.
LINGER = 2.0
HEALTH_PORT_ONLY = "the health port serves /healthz, /readyz and /metrics only"


@dataclass(frozen=True)
class HttpLimits:
    max_request_line_bytes: int = 8 << 10
    max_header_bytes: int = 64 << 10
    max_headers: int = 100
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_pending: int = 1000
    send_stall: float = 30.0

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpLimits:
        return cls(
            max_request_line_bytes=settings.max_request_line_bytes,
            max_header_bytes=settings.max_header_bytes,
            max_headers=settings.max_headers,
            header_timeout=settings.header_timeout,
            body_timeout=settings.body_timeout,
            max_pending=settings.max_pending_handshakes,
            send_stall=settings.send_stall,
        )


class Waiting:
    """How many of one server's connections are waiting for a request's headers."""

    def __init__(self) -> None:
        self.count = 0


class OverLimit(Exception):
    """Raised in a parser callback: httptools stops parsing and re-raises it as the context of its own error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def bounded_protocol(
    limits: HttpLimits, gate: HandshakeGate | None = None, health_port: int = 0, health_limit: int = 32
) -> type[BoundedHttpProtocol]:
    """The protocol class for one server (uvicorn's `http=`): these limits and a count of its own; with
    `gate`, what every websocket handshake passes first (a valid token, then the admission). Connections to
    `health_port` (the node's GATEWAY_HEALTH_PORT) are counted apart: at most `health_limit` open there, none
    counted on the main port."""

    class ServerHttpProtocol(BoundedHttpProtocol):
        pass

    ServerHttpProtocol.limits = limits
    ServerHttpProtocol.waiting = Waiting()
    ServerHttpProtocol.gate = gate
    ServerHttpProtocol.health_port = health_port
    ServerHttpProtocol.health_limit = health_limit
    ServerHttpProtocol.health_open = Waiting()
    return ServerHttpProtocol


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits above; `bounded_protocol` makes one class per server."""

    limits: ClassVar[HttpLimits] = HttpLimits()
    waiting: ClassVar[Waiting] = Waiting()
    gate: ClassVar[HandshakeGate | None] = None
    health_port: ClassVar[int] = 0
    health_limit: ClassVar[int] = 32
    health_open: ClassVar[Waiting] = Waiting()  # connections open on the health port

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.awaiting_headers = False
        self.wait_number = 0  # bytes count towards a wait only while that same wait lasts
        self.bytes_in_wait = 0
        self.header_bytes = 0
        self.header_deadline: asyncio.TimerHandle | None = None
        self.body_deadline: asyncio.TimerHandle | None = None
        self.send_deadline: asyncio.TimerHandle | None = None
        self.linger: asyncio.TimerHandle | None = None
        self.refused = False
        self.on_health_port = False
        self.pending = self.waiting  # the count this connection's waits go to (not the main port's on the other)

    # -- the transport's side

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if _on_health_port(self.server, self.health_port):
            if self.health_open.count >= self.health_limit:
                self._turn_away()
                return
            self.on_health_port = True
            self.health_open.count += 1
            self.pending = _UNCOUNTED  # the health port's bound is on what is open there
        elif self.waiting.count >= self.limits.max_pending:
            self._turn_away()
            return
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.on_health_port:
            self.on_health_port = False
            self.health_open.count -= 1
        self._headers_done()
        self._cancel_body_deadline()
        self._cancel_send_deadline()
        if self.linger is not None:
            self.linger.cancel()
            self.linger = None
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        """The transport's buffer is full: the reader takes nothing. It has `send_stall` seconds to take some."""
        super().pause_writing()
        if self.send_deadline is None:
            self.send_deadline = self.loop.call_later(self.limits.send_stall, self._send_stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._cancel_send_deadline()

    def data_received(self, data: bytes) -> None:
        """uvicorn's, plus the limits: what a callback refuses comes back as the context of httptools' error."""
        if self.refused:
            return  # answered and closing: what else arrives is dropped
        if self.timeout_keep_alive_task is not None:
            self._await_headers()  # the connection was idle between requests: these bytes begin the next one
        wait = self.wait_number
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        except httptools.HttpParserError as exc:
            over = exc.__context__
            if isinstance(over, OverLimit):
                self._refuse(over.status, over.code, over.message)
            else:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
            return
        # The callbacks only see finished header lines; this also catches one that never ends. A request that
        # began inside this chunk is counted from the next one: at most one read of slack, never a false 431.
        if self.awaiting_headers and self.wait_number == wait:
            self.bytes_in_wait += len(data)
            if self.bytes_in_wait > self.limits.max_header_bytes + self.limits.max_request_line_bytes:
                self._refuse(431, "headers_too_large", f"request headers over {self.limits.max_header_bytes} bytes")

    def handle_websocket_upgrade(self) -> None:
        if self.on_health_port:
            self._refuse(404, "not_found", HEALTH_PORT_ONLY)
            return
        if self.gate is not None:
            refusal = self.gate.check(self.headers, self.url, time.monotonic(), random.random())
            if refusal is not None:
                # Not logged one by one: a storm turns thousands away a second (gateway_handshakes_refused_total).
                self._refuse(refusal.status, refusal.code, refusal.message, refusal.retry_after_ms, quiet=True)
                return
        # The socket leaves this protocol, whose connection_lost will never run.
        self._headers_done()
        self._cancel_body_deadline()
        super().handle_websocket_upgrade()
        self._close_if_handshake_refused()
        # What uvicorn's connection_lost would do: the parser holds this protocol's callbacks, and left in that
        # cycle the protocol waits for the cyclic collector (a storm's worth of them makes its pauses long).
        self.parser = None  # type: ignore[assignment]

    def _close_if_handshake_refused(self) -> None:
        """uvicorn hands the request to websockets' parser, stricter than ours (8 KiB lines, 128 headers, no
        body). What that parser refuses, uvicorn's websocket protocol neither answers nor closes, and no
        deadline is left on the socket: send websockets' answer (or ours) and close."""
        websocket = self.transport.get_protocol()
        if getattr(websocket, "handshake_initiated", True):
            return  # the app has the handshake: it answers at once
        parser = getattr(websocket, "conn", None)  # websockets' sans-I/O ServerProtocol (uvicorn calls it conn)
        refusal = b"".join(parser.data_to_send()) if parser is not None else b""
        log.info("%s refused: a websocket handshake websockets cannot parse", _peer(self.client))
        default_headers = self.server_state.default_headers
        self.transport.write(
            refusal or answer(400, "bad_handshake", "not a websocket handshake this server takes", default_headers)
        )
        self.transport.close()

    # -- the parser's side

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.header_bytes = 0
        self._await_headers()

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > self.limits.max_request_line_bytes:
            raise OverLimit(414, "uri_too_long", f"request target over {self.limits.max_request_line_bytes} bytes")
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= self.limits.max_headers:
            raise OverLimit(431, "too_many_headers", f"more than {self.limits.max_headers} request headers")
        self.header_bytes += len(name) + len(value) + 4  # ": " and CRLF
        if self.header_bytes > self.limits.max_header_bytes:
            raise OverLimit(431, "headers_too_large", f"request headers over {self.limits.max_header_bytes} bytes")
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._headers_done()
        super().on_headers_complete()
        self.body_deadline = self.loop.call_later(self.limits.body_timeout, self._body_timed_out)

    def on_message_complete(self) -> None:
        self._cancel_body_deadline()
        super().on_message_complete()

    # -- the limits

    def _await_headers(self) -> None:
        if self.awaiting_headers:
            return
        self.awaiting_headers = True
        self.pending.count += 1
        self.wait_number += 1
        self.bytes_in_wait = 0
        self.header_deadline = self.loop.call_later(self.limits.header_timeout, self._headers_timed_out)

    def _headers_done(self) -> None:
        if not self.awaiting_headers:
            return
        self.awaiting_headers = False
        self.pending.count -= 1
        self._cancel_header_deadline()

    def _cancel_body_deadline(self) -> None:
        if self.body_deadline is not None:
            self.body_deadline.cancel()
            self.body_deadline = None

    def _cancel_header_deadline(self) -> None:
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _cancel_send_deadline(self) -> None:
        if self.send_deadline is not None:
            self.send_deadline.cancel()
            self.send_deadline = None

    def _send_stalled(self) -> None:
        # Cut, not closed: a close would wait for the buffered answer to be read, which it never is. The app's
        # answer sees a disconnect (an export ends there and gives back its slot).
        self.send_deadline = None
        log.info("%s cut: it took nothing of its answer for %g s", _peer(self.client), self.limits.send_stall)
        self.transport.abort()

    def _headers_timed_out(self) -> None:
        self.header_deadline = None
        self._refuse(408, "request_timeout", f"request headers not complete within {self.limits.header_timeout:g} s")

    def _body_timed_out(self) -> None:
        self.body_deadline = None
        cycle = self.cycle
        if cycle.response_started or self.pipeline:
            # The app is answering (this request, or one pipelined before it): nothing else can be said here.
            self.transport.close()
            return
        # The app reads a disconnect instead of the rest of the body, and what it sends is dropped.
        cycle.disconnected = True
        cycle.message_event.set()
        self._refuse(408, "request_timeout", f"request body not complete within {self.limits.body_timeout:g} s")

    def _refuse(
        self, status: int, code: str, message: str, retry_after_ms: int | None = None, quiet: bool = False
    ) -> None:
        """Answer and close, lingering so the answer arrives. The connection stays counted as waiting until it
        is gone, so lingering ones count against `max_pending` too."""
        self.refused = True
        self._cancel_header_deadline()
        self._cancel_body_deadline()
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.disconnected:
            self.transport.close()  # an earlier (pipelined) request is still being answered: ours cannot be said
            return
        if not quiet:
            log.info("%s refused: %d %s", _peer(self.client), status, message)
        self.transport.write(answer(status, code, message, self.server_state.default_headers, retry_after_ms))
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()  # the client reads the answer, then end of stream
        self.linger = self.loop.call_later(LINGER, self.transport.close)

    def _turn_away(self) -> None:
        """Too many connections wait for their headers: 503 and close at once, the cheapest answer there is."""
        self.refused = True
        retry_ms = int(250 + 1000 * random.random())  # spread the retries over a second or so
        self.transport.write(
            answer(
                503,
                "busy",
                "too many connections waiting to be served: retry shortly",
                self.server_state.default_headers,
                retry_ms,
            )
        )
        self.transport.close()


def answer(
    status: int, code: str, message: str, default_headers: list[tuple[bytes, bytes]], retry_after_ms: int | None = None
) -> bytes:
    """A complete response that closes the connection, its body the JSON error the app's own refusals use."""
    error: dict[str, str | int] = {"error": code, "message": message}
    extra = b""
    if retry_after_ms is not None:
        error["retry_after_ms"] = retry_after_ms
        extra = b"retry-after: %d\r\n" % max(1, round(retry_after_ms / 1000))
    body = msgspec.json.encode(error)
    head = [b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode())]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head.append(b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n" % len(body))
    return b"".join(head) + extra + b"\r\n" + body


_UNCOUNTED = Waiting()


def _on_health_port(server: tuple[str, int | None] | None, health_port: int) -> bool:
    """Whether a connection whose local address is `server` came in on the health port."""
    return bool(health_port) and server is not None and server[1] == health_port


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "a client"
