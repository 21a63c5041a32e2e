"""One plain HTTP request handed to the ASGI app: its `receive` (the body as it arrives, then a disconnect)
and its `send` (the response's head and body, framed by content-length or chunked), as the ASGI HTTP spec
(version 2.3) has them.

The connection (gateway.web.server.http11) feeds the body in and says when the socket pauses or is gone; the
cycle tells it when the response is complete, so it can serve the next request or close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

log = logging.getLogger("gateway.http")
# One line per request as its response starts (gateway.web.node.logs formats and filters it): client, method, target,
# HTTP version, status.
access = logging.getLogger("gateway.access")

NO_BODY = frozenset({204, 304}) | frozenset(range(100, 200))
READ_AHEAD = 64 << 10  # body bytes buffered before the socket's reading pauses until the app takes them


class Cycle:
    """A request's ASGI exchange; `done(keep_alive)` is called once its response is complete (or it failed)."""

    def __init__(
        self,
        scope: dict[str, Any],
        transport: asyncio.Transport,
        flow: Flow,
        keep_alive: bool,
        default_headers: list[tuple[bytes, bytes]],
        done: Callable[[Cycle, bool], None],
        log_access: bool = True,
    ) -> None:
        self.scope = scope
        self.transport = transport
        self.flow = flow
        self.keep_alive = keep_alive
        self.default_headers = default_headers
        self.done = done
        self.body = bytearray()
        self.more_body = True
        self.read_all = False  # the app was given the body's end: what it receives next is the disconnect
        self.expect_continue = (b"expect", b"100-continue") in scope["headers"]
        self.arrived = asyncio.Event()
        self.disconnected = False
        self.response_started = False
        self.response_complete = False
        self.chunked = False
        self.expected: int | None = None  # content-length the app declared, bytes left to send
        self.head_only = scope["method"] == "HEAD"
        self.status = 0
        self.log_access = log_access

    # -- the connection's side

    def feed(self, data: bytes) -> None:
        if self.response_complete:
            return  # answered already: the rest of the body is read and dropped
        self.body += data
        if len(self.body) > READ_AHEAD:
            self.flow.pause_reading()
        self.arrived.set()

    def body_complete(self) -> None:
        self.more_body = False
        self.arrived.set()

    def disconnect(self) -> None:
        self.disconnected = True
        self.arrived.set()

    async def run(self, app: Any) -> None:
        try:
            await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            if not isinstance(exc, Exception):
                self._finish(False)
                raise
            log.exception("Exception in ASGI application")
            if not self.response_started and not self.disconnected:
                self.transport.write(_plain(500, self.default_headers))
            self._finish(False)
            return
        if not self.response_complete:
            if not self.response_started and not self.disconnected:
                log.error("ASGI callable returned without completing its response")
                self.transport.write(_plain(500, self.default_headers))
            self._finish(False)

    # -- the app's side

    async def receive(self) -> dict[str, Any]:
        """The body as it arrives; once all of it was read, wait for the client to leave or the answer to end
        (Starlette listens for a disconnect while it streams a response)."""
        while not self.disconnected and not self.response_complete and (self.read_all or not self.body):
            if not self.read_all and not self.more_body:
                break  # the whole body is here (or there is none): said once, below
            if self.expect_continue:  # the client waits to be asked for its body (curl does, past 1 KiB)
                self.expect_continue = False
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.flow.resume_reading()
            self.arrived.clear()
            await self.arrived.wait()
        if self.disconnected or self.response_complete:
            return {"type": "http.disconnect"}
        body, self.body = bytes(self.body), bytearray()
        self.read_all = not self.more_body
        self.flow.resume_reading()
        return {"type": "http.request", "body": body, "more_body": self.more_body}

    async def send(self, message: dict[str, Any]) -> None:
        if self.disconnected:
            return  # the client is gone: what the app still says is dropped
        await self.flow.drained()
        if self.disconnected:
            # It left while this waited for room in its socket (a reader that stopped, then went, or was cut at
            # the send stall): the socket is closed, a write would raise into the app.
            return
        kind = message["type"]
        if kind == "http.response.start" and not self.response_started:
            self.response_started = True
            self._start(message["status"], message.get("headers", []))
        elif kind == "http.response.body" and self.response_started and not self.response_complete:
            self._body(message.get("body", b""), message.get("more_body", False))
        else:
            raise RuntimeError(f"unexpected ASGI message {kind!r} in this state")

    def _start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        self.status = status
        if self.log_access and access.isEnabledFor(logging.INFO):
            self._log_access(status)
        try:
            phrase = HTTPStatus(status).phrase.encode()
        except ValueError:
            phrase = b""
        lines = [b"HTTP/1.1 %d %s\r\n" % (status, phrase)]
        lines += [name + b": " + value + b"\r\n" for name, value in self.default_headers]
        for name, value in headers:
            lower = name.lower()
            if lower == b"content-length":
                self.expected = int(value)
            elif lower == b"transfer-encoding" and value.lower() == b"chunked":
                self.chunked = True
            elif lower == b"connection" and value.lower() == b"close":
                self.keep_alive = False
            lines.append(name + b": " + value + b"\r\n")
        if self.expected is None and not self.chunked and status not in NO_BODY and not self.head_only:
            if self.scope["http_version"] == "1.0":
                self.keep_alive = False  # HTTP/1.0 knows no chunks: the body ends where the connection does
            else:
                self.chunked = True
                lines.append(b"transfer-encoding: chunked\r\n")
        if not self.keep_alive:
            lines.append(b"connection: close\r\n")
        elif self.scope["http_version"] == "1.0":
            lines.append(b"connection: keep-alive\r\n")  # it asked to: HTTP/1.0 closes unless told otherwise
        lines.append(b"\r\n")
        self.transport.write(b"".join(lines))

    def _log_access(self, status: int) -> None:
        scope = self.scope
        client = scope.get("client")
        target = scope["raw_path"].decode("latin-1")
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        peer = f"{client[0]}:{client[1]}" if client else "-"
        access.info('%s - "%s %s HTTP/%s" %d', peer, scope["method"], target, scope["http_version"], status)

    def _body(self, body: bytes, more: bool) -> None:
        if self.head_only or self.status in NO_BODY:
            body = b""
        elif self.chunked:
            if body:
                self.transport.write(b"%x\r\n%s\r\n" % (len(body), body))
            if not more:
                self.transport.write(b"0\r\n\r\n")
        else:
            if self.expected is not None:
                if len(body) > self.expected:
                    raise RuntimeError("response body longer than its content-length")
                self.expected -= len(body)
            self.transport.write(body)
        if not more:
            if self.expected:  # the app declared more than it sent: the connection cannot be reused
                self.keep_alive = False
            self._finish(self.keep_alive)

    def _finish(self, keep_alive: bool) -> None:
        if self.response_complete:
            return
        self.response_complete = True
        self.body = bytearray()
        self.arrived.set()
        self.flow.resume_reading()  # a body still arriving is read to its end (and dropped) before what follows
        self.done(self, keep_alive)


class Flow:
    """Reading and writing pressure on one socket, shared by its cycles."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.reading_paused = False
        self.writable = asyncio.Event()
        self.writable.set()

    def pause_reading(self) -> None:
        if not self.reading_paused and not self.transport.is_closing():
            self.reading_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.reading_paused and not self.transport.is_closing():
            self.reading_paused = False
            self.transport.resume_reading()

    async def drained(self) -> None:
        if not self.writable.is_set():
            await self.writable.wait()


def _plain(status: int, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    body = HTTPStatus(status).phrase.encode()
    head = [b"HTTP/1.1 %d %s\r\n" % (status, body)]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head.append(
        b"content-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body)
    )
    return b"".join(head) + body
