"""A connection to the node: HTTP/1.1 parsed by httptools, bounded before anything sees a request
(gateway.web.server.limits), each plain request handed to the ASGI app in turn (gateway.web.server.cycle),
and a websocket upgrade answered by the node's own code (gateway.web.server.upgrade), never through ASGI.

Pipelined requests are answered one at a time, in order: the next waits unread in the kernel (its body deadline
counts from its turn). HTTP/1.0 is answered with `connection: close` unless it asked for keep-alive (then told
`connection: keep-alive`); a response without a length is then ended by the close, HTTP/1.0 knowing no chunks.

The health port (GATEWAY_HEALTH_PORT) has a bound of its own instead of the pending cap: at most
`health_limit` connections open there at once, idle or not; nothing there counts against the main port's, and
it takes no websocket (404). A websocket's upgrade request is plain HTTP until its headers complete, so the
same bounds hold for it; then it passes gateway.web.websocket.handshake_gate (a valid token, then the admission at its
user's share) before any websocket work.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from typing import Any, cast
from urllib.parse import unquote

import httptools

from .cycle import Cycle, Flow
from .limits import HEALTH_PORT_ONLY, LINGER, OverLimit, answer
from .served import Served
from .upgrade import Upgrade, is_websocket

log = logging.getLogger("gateway.http")


class HttpProtocol(asyncio.Protocol):
    """One client connection; `Served` holds what its server's connections share."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.limits = served.limits
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        self.flow: Flow = None  # type: ignore[assignment]
        self.parser = httptools.HttpRequestParser(self)
        self.client: tuple[str, int] | None = None
        self.server: tuple[str, int] | None = None
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.cycle: Cycle | None = None  # the request being answered
        self.reading: Cycle | None = None  # the request whose body is arriving (a later one, when pipelined)
        self.after_body = False  # whether to keep alive once the body of a request answered early has arrived
        self.pipeline: deque[Cycle] = deque()
        self.task: asyncio.Task[None] | None = None
        self.awaiting_headers = False
        self.wait_number = 0  # bytes count towards a wait only while that same wait lasts
        self.bytes_in_wait = 0
        self.header_bytes = 0
        self.header_deadline: asyncio.TimerHandle | None = None
        self.body_deadline: asyncio.TimerHandle | None = None
        self.send_deadline: asyncio.TimerHandle | None = None
        self.idle: asyncio.TimerHandle | None = None
        self.linger: asyncio.TimerHandle | None = None
        self.upgrade: Upgrade | None = None
        self.refused = False
        self.on_health_port = False
        self.pending = served.waiting  # the count this connection's waits go to

    # -- the transport's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is one, without the class
        self.flow = Flow(self.transport)
        self.client = _address(transport.get_extra_info("peername"))
        self.server = _address(transport.get_extra_info("sockname"))
        served = self.served
        served.connections.add(self)
        if served.health_port and self.server is not None and self.server[1] == served.health_port:
            if served.health_open.count >= served.health_limit:
                self._turn_away()
                return
            self.on_health_port = True
            served.health_open.count += 1
            self.pending = _UNCOUNTED  # the health port's bound is on what is open there
        elif served.waiting.count >= self.limits.max_pending:
            self._turn_away()
            return
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self.served.connections.discard(self)
        if self.on_health_port:
            self.on_health_port = False
            self.served.health_open.count -= 1
        self._headers_done()
        for timer in (self.body_deadline, self.send_deadline, self.idle, self.linger):
            if timer is not None:
                timer.cancel()
        self.body_deadline = self.send_deadline = self.idle = self.linger = None
        for cycle in {c for c in (self.cycle, self.reading, *self.pipeline) if c is not None}:
            if not cycle.response_complete and not cycle.disconnected and self.served.client_gone is not None:
                self.served.client_gone()  # left before its answer ended (a body deadline's cut is a 408)
            cycle.disconnect()
        self.pipeline.clear()
        self.flow.writable.set()  # a send waiting for the socket wakes, and finds the client gone
        if self.upgrade is not None:
            self.upgrade.lost()
            self.upgrade = None
        self.parser = None  # type: ignore[assignment]  # it holds our callbacks: break the cycle now

    def pause_writing(self) -> None:
        """The transport's buffer is full: the reader takes nothing. It has `send_stall` seconds to take some."""
        self.flow.writable.clear()
        if self.send_deadline is None:
            self.send_deadline = self.loop.call_later(self.limits.send_stall, self._send_stalled)

    def resume_writing(self) -> None:
        self.flow.writable.set()
        if self.send_deadline is not None:
            self.send_deadline.cancel()
            self.send_deadline = None

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return  # answered and closing: what else arrives is dropped
        if self.upgrade is not None:
            self.upgrade.early(data)  # the handshake is being decided: these wait for the link
            return
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None
            self._await_headers()  # the connection was idle between requests: these bytes begin the next one
        wait = self.wait_number
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as upgrade:
            if not is_websocket(self.headers):
                return  # another protocol (h2c, say): served as plain HTTP, what follows is not read
            if self.cycle is not None:
                self.transport.close()  # pipelined behind a request still being answered: no answer fits
                return
            self._upgrade(data[upgrade.args[0] :] if upgrade.args else b"")
            return
        except httptools.HttpParserError as exc:
            over = exc.__context__
            if isinstance(over, OverLimit):
                self._refuse(over.status, over.code, over.message)
            else:
                self._refuse(400, "bad_request", "Invalid HTTP request received.")
            return
        # The callbacks only see finished header lines; this also catches one that never ends. A request that
        # began inside this chunk is counted from the next one: at most one read of slack, never a false 431.
        if self.awaiting_headers and self.wait_number == wait:
            self.bytes_in_wait += len(data)
            if self.bytes_in_wait > self.limits.max_header_bytes + self.limits.max_request_line_bytes:
                self._refuse(431, "headers_too_large", f"request headers over {self.limits.max_header_bytes} bytes")

    def eof_received(self) -> bool | None:
        return None  # the client ended its side: close ours (an answer in flight sees a disconnect)

    # -- the parser's side

    def on_message_begin(self) -> None:
        self.url, self.headers, self.header_bytes = b"", [], 0
        self._await_headers()

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > self.limits.max_request_line_bytes:
            raise OverLimit(414, "uri_too_long", f"request target over {self.limits.max_request_line_bytes} bytes")
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(self.headers) >= self.limits.max_headers:
            raise OverLimit(431, "too_many_headers", f"more than {self.limits.max_headers} request headers")
        self.header_bytes += len(name) + len(value) + 4  # ": " and CRLF
        if self.header_bytes > self.limits.max_header_bytes:
            raise OverLimit(431, "headers_too_large", f"request headers over {self.limits.max_header_bytes} bytes")
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self._headers_done()
        if self.parser.should_upgrade() and is_websocket(self.headers):
            return  # httptools raises HttpParserUpgrade once the message is parsed: answered there
        cycle = Cycle(
            self._scope(),
            self.transport,
            self.flow,
            self.parser.should_keep_alive(),
            self.served.default_headers,
            self._answered,
            self.served.access_log,
        )
        self.reading = cycle
        if self.cycle is None:
            self._start(cycle)
        else:
            self.pipeline.append(cycle)
            self.flow.pause_reading()  # one request answered at a time: the next waits in the kernel

    def on_body(self, body: bytes) -> None:
        if self.reading is not None:
            self.reading.feed(body)

    def on_message_complete(self) -> None:
        self._cancel_body_deadline()
        reading, self.reading = self.reading, None
        if reading is not None:
            reading.body_complete()
            if reading.response_complete:  # answered before its body ended: what was waiting for it goes on
                self._next(self.after_body)

    # -- requests

    def _scope(self) -> dict[str, Any]:
        parsed = httptools.parse_url(self.url)
        raw_path = parsed.path
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": self.parser.get_http_version(),
            "server": self.server,
            "client": self.client,
            "scheme": "http",
            "method": self.parser.get_method().decode("ascii"),
            "root_path": "",
            "path": unquote(raw_path.decode("ascii", "replace")),
            "raw_path": raw_path,
            "query_string": parsed.query or b"",
            "headers": self.headers,
            "state": dict(self.served.state),
        }

    def _start(self, cycle: Cycle) -> None:
        self.cycle = cycle
        if cycle is self.reading and self.body_deadline is None:
            # Its body is counted from here: a pipelined request's waited unread in the kernel until now.
            self.body_deadline = self.loop.call_later(self.limits.body_timeout, self._body_timed_out)
        self.served.proxy.apply(cycle.scope)
        self.task = self.loop.create_task(cycle.run(self.served.app))
        self.served.tasks.add(self.task)
        self.task.add_done_callback(self.served.tasks.discard)

    def _answered(self, cycle: Cycle, keep_alive: bool) -> None:
        """A response is complete: the next pipelined request, an idle wait, or the end of the connection; once
        the request's body has all arrived (read and dropped: closing with it unread would reset the connection,
        and the client could lose the answer, a 413 say; the body deadline still bounds it)."""
        if cycle is not self.cycle:
            return
        self.cycle = None
        if cycle is self.reading:
            self.after_body = keep_alive
            return
        self._next(keep_alive)

    def _next(self, keep_alive: bool) -> None:
        if self.transport.is_closing() or self.refused:
            return
        if not keep_alive or self.served.stopping:
            self.transport.close()
            self.pipeline.clear()
            return
        if self.pipeline:
            self._start(self.pipeline.popleft())
            if not self.pipeline:
                self.flow.resume_reading()
            return
        if self.reading is None and not self.awaiting_headers:
            self.idle = self.loop.call_later(self.limits.keep_alive, self.transport.close)

    def shutdown(self) -> None:
        """The server stops: an idle connection closes now, one being answered after its answer."""
        if self.cycle is None and self.upgrade is None:
            self.transport.close()

    # -- the upgrade

    def _upgrade(self, leftover: bytes) -> None:
        self._cancel_body_deadline()
        if self.on_health_port:
            self._refuse(404, "not_found", HEALTH_PORT_ONLY)
            return
        gate = self.served.gate
        if gate is not None:
            refusal = gate.check(self.headers, self.url, self.loop.time(), random.random())
            if refusal is not None:
                # Not logged one by one: a storm turns thousands away a second (gateway_handshakes_refused_total).
                self._refuse(refusal.status, refusal.code, refusal.message, refusal.retry_after_ms, quiet=True)
                return
        self.upgrade = Upgrade(self.served, self.transport, self.url, self.headers, self.client, self.server, self)
        self.upgrade.method = self.parser.get_method()
        self.upgrade.early(leftover)
        self.parser = None  # type: ignore[assignment]  # nothing more is parsed as HTTP here
        self.upgrade.begin()

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
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _cancel_body_deadline(self) -> None:
        if self.body_deadline is not None:
            self.body_deadline.cancel()
            self.body_deadline = None

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
        cycle = self.reading
        if cycle is None or cycle is not self.cycle or cycle.response_started:
            # The app is answering (this request, or one pipelined before it): nothing else can be said here.
            self.transport.close()
            return
        cycle.disconnect()  # the app reads a disconnect instead of the rest of the body; what it sends is dropped
        self._refuse(408, "request_timeout", f"request body not complete within {self.limits.body_timeout:g} s")

    def _refuse(
        self, status: int, code: str, message: str, retry_after_ms: int | None = None, quiet: bool = False
    ) -> None:
        """Answer and close, lingering so the answer arrives. The connection stays counted as waiting until it
        is gone, so lingering ones count against `max_pending` too."""
        self.refused = True
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None
        self._cancel_body_deadline()
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.disconnected:
            self.transport.close()  # an earlier (pipelined) request is still being answered: ours cannot be said
            return
        if not quiet:
            log.info("%s refused: %d %s", _peer(self.client), status, message)
        self.transport.write(answer(status, code, message, self.served.default_headers, retry_after_ms))
        linger(self.transport, self)

    def _turn_away(self) -> None:
        """Too many connections wait for their headers: 503 and close at once, the cheapest answer there is."""
        self.refused = True
        retry_ms = int(250 + 1000 * random.random())  # spread the retries over a second or so
        message = "too many connections waiting to be served: retry shortly"
        self.transport.write(answer(503, "busy", message, self.served.default_headers, retry_ms))
        self.transport.close()


def linger(transport: asyncio.Transport, protocol: HttpProtocol) -> None:
    """After an answer that ends the connection: end of stream, then a close once the client had time to read."""
    if not transport.can_write_eof():
        transport.close()
        return
    transport.write_eof()  # the client reads the answer, then end of stream
    protocol.linger = protocol.loop.call_later(LINGER, transport.close)


_UNCOUNTED = type("Uncounted", (), {"count": 0})()


def _address(found: Any) -> tuple[str, int] | None:
    return (str(found[0]), int(found[1])) if isinstance(found, tuple) and len(found) >= 2 else None


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "a client"
