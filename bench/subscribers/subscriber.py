"""One simulated client: its connections one after the other, its dialect's state kept across them."""

from __future__ import annotations

import asyncio
import ipaddress
import random
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

from gateway.core.restart import RESTART_CODE, retry_after_ms

from .counters import Stats
from .dialects import make_dialect
from .wsclient import HANDSHAKE, WSClient, request_head, retry_delay


class Host(Protocol):
    """What a subscriber needs of the process that runs it (bench.subscribers.worker.Worker is one)."""

    loop: asyncio.AbstractEventLoop
    stopping: bool
    handshake_timeout: float
    max_backoff: float

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None: ...

    def connected_changed(self, up: bool) -> None: ...

    def live_changed(self, up: bool) -> None: ...


INITIAL_BACKOFF = 0.25
# Loopback clients bind a source address of their own, SOURCE_SHARE subscribers to each (127.1.0.1, 127.1.1.1,
# ...): each address has its own ephemeral ports (32768-60999 here), so 16,000 connections to one port, and the
# TIME_WAITs of the run before, never exhaust them. Linux accepts any 127.0.0.0/8 source on loopback.
SOURCE_SHARE = 256


def source_address(host: str, idx: int) -> tuple[str, int] | None:
    """The local address subscriber `idx` binds before connecting to `host`; None (the kernel's choice) unless
    `host` is an IPv4 loopback address."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    if address.version != 4 or not address.is_loopback:
        return None
    block = idx // SOURCE_SHARE % (256 * 254)
    return (f"127.1.{block // 254}.{1 + block % 254}", 0)


AWAY = (RESTART_CODE, 1013)  # closes that say the node is restarting or cannot serve now (its bus out of reach)


class Subscriber:
    """One simulated client: reconnects by itself (jittered exponential backoff, or the delay a 503 or a
    restarting node's close asks for) and keeps its dialect's state and cursors across connections. Given several
    URLs (nodes behind a load balancer), it starts on the first and moves to the next when a connection attempt
    fails, is refused with 503 or is closed with 1012 or 1013, as a load balancer whose health checks took that
    node out would."""

    __slots__ = (
        "idx",
        "host",
        "port",
        "head",
        "local",
        "addresses",
        "dialect",
        "stats",
        "ws",
        "connected",
        "live",
        "backoff",
        "timer",
        "worker",
    )

    def __init__(
        self,
        worker: Host | None,
        idx: int,
        url: str | Sequence[str],
        channels: Sequence[str],
        headers: Sequence[str],
        dialect: str,
        stats: Stats,
        await_state: bool = False,
    ) -> None:
        self.idx = idx
        self.stats = stats
        self.dialect = make_dialect(dialect, channels, stats, await_state)
        self.addresses: list[tuple[str, int, bytes]] = []
        for address in [url] if isinstance(url, str) else url:
            parts = urlsplit(address)
            if parts.scheme not in ("ws", "http"):
                raise ValueError(f"{address}: only ws:// (or http://) URLs")
            host, port = parts.hostname or "127.0.0.1", parts.port or 80
            path, query = self.dialect.target(parts.path or "/", parts.query)
            target = path + ("?" + query if query else "")
            self.addresses.append((host, port, request_head(host, port, target, [*self.dialect.headers, *headers])))
        self.host, self.port, self.head = self.addresses[0]
        self.local = source_address(self.host, idx)
        self.ws: WSClient | None = None
        self.connected = False
        self.live = False
        self.backoff = INITIAL_BACKOFF
        self.timer: asyncio.TimerHandle | None = None
        self.worker = worker
        self.dialect.notify = self.check_live

    def connect(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        w = self.worker
        assert w is not None
        if w.stopping:
            return
        ws = WSClient(self, self.head)
        self.ws = ws
        w.spawn(self._connect(ws))

    async def _connect(self, ws: WSClient) -> None:
        w = self.worker
        assert w is not None
        try:
            await w.loop.create_connection(lambda: ws, self.host, self.port, local_addr=self.local)
        except OSError as exc:
            if ws is self.ws:
                self.ws_failed(ws, type(exc).__name__)
            return
        if ws is not self.ws:  # dropped (a storm, a stop) while connecting
            ws.abort()
        elif ws.phase == HANDSHAKE:
            w.loop.call_later(w.handshake_timeout, self._handshake_timeout, ws)

    def _handshake_timeout(self, ws: WSClient) -> None:
        if ws is self.ws and ws.phase == HANDSHAKE:
            ws.abort()
            self.ws_failed(ws, "timeout")

    def _retry(self, delay: float | None) -> None:
        w = self.worker
        if w is None or w.stopping:
            return
        if delay is None:
            delay = self.backoff * random.uniform(0.5, 1.5)
            self.backoff = min(self.backoff * 2, w.max_backoff)
        self.timer = w.loop.call_later(delay, self.connect)

    def _set_connected(self, up: bool) -> None:
        if up != self.connected:
            self.connected = up
            if self.worker is not None:
                self.worker.connected_changed(up)

    def check_live(self) -> None:
        up = self.connected and self.dialect.ready()
        if up != self.live:
            self.live = up
            if self.worker is not None:
                self.worker.live_changed(up)

    def drop(self) -> None:
        """Abruptly, without a close frame and without reconnecting (a storm reconnects explicitly)."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        ws, self.ws = self.ws, None
        if ws is not None:
            ws.abort()
        self._down()

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        ws, self.ws = self.ws, None
        if ws is not None:
            ws.close()
        self._down()

    def _down(self) -> None:
        self.dialect.closed()
        self._set_connected(False)
        self.check_live()

    # -- Handler

    def ws_open(self, ws: WSClient) -> None:
        if ws is not self.ws:
            return
        self.stats.connects += 1
        self.backoff = INITIAL_BACKOFF
        self._set_connected(True)
        self.dialect.opened(ws.send)
        self.check_live()

    def ws_message(self, opcode: int, payload: bytes, now: float) -> None:
        self.dialect.message(opcode, payload, now)

    def ws_closed(self, ws: WSClient, code: int) -> None:
        if ws is not self.ws:
            return
        self.ws = None
        self.stats.count(self.stats.closes, code)
        hint = retry_after_ms(ws.close_reason) if code == RESTART_CODE else None
        if hint is not None:  # a restarting node said when to come back, as gateway.client honours it
            self.stats.count(self.stats.hints, hint)
        self._down()
        if code in AWAY:  # the node is leaving or cannot serve: a load balancer sends the retry elsewhere
            self._next_address()
        self._retry(None if hint is None else hint / 1000)

    def ws_refused(self, ws: WSClient, status: int, headers: dict[str, str], body: bytes) -> None:
        if ws is not self.ws:
            return
        self.ws = None
        self.stats.failed_connects += 1
        self.stats.count(self.stats.failures, str(status))
        if status == 503:  # busy or unable to serve: as a load balancer would, try another node
            self._next_address()
        self._retry(retry_delay(status, headers, body))

    def ws_failed(self, ws: WSClient, reason: str) -> None:
        if ws is not self.ws:
            return
        self.ws = None
        self.stats.failed_connects += 1
        self.stats.count(self.stats.failures, reason)
        self._next_address()  # that node is gone
        self._retry(None)

    def home(self) -> bool:
        """Back to the first node, if a fault moved it off (closed, then connected again with its cursors)."""
        if (self.host, self.port, self.head) == self.addresses[0]:
            return False
        self.close()
        self.host, self.port, self.head = self.addresses[0]
        self.local = source_address(self.host, self.idx)
        self.connect()
        return True

    def _next_address(self) -> None:
        """Given several nodes (behind a load balancer, as it were): the next one."""
        if len(self.addresses) > 1:
            at = self.addresses.index((self.host, self.port, self.head))
            self.host, self.port, self.head = self.addresses[(at + 1) % len(self.addresses)]
            self.local = source_address(self.host, self.idx)
