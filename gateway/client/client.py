"""`GatewayClient`, its loop: connect (gateway.client.dial), subscribe, read, and after a drop reconnect and
resume every channel (what it keeps per channel is gateway.client.channels'). The package's docstring
(gateway.client) is the user's guide."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable
from typing import Self
from urllib.parse import urlsplit, urlunsplit

import msgspec
import websockets

from ..core.protocol import (
    Format,
    Ping,
    ServerMessages,
    Subscribe,
    Unsubscribe,
    decode_server,
)
from ..core.restart import RESTART_CODE, retry_after_ms
from .channels import ClientChannels, Followed
from .dial import Dialer
from .errors import ChannelRefused, ConnectionFailed, GatewayError, Unauthorized
from .tokens import TokenProvider, Tokens

log = logging.getLogger("gateway.client")  # the client's own log, whichever module of it writes

_json = msgspec.json.Encoder()
_msgpack = msgspec.msgpack.Encoder()

CLOSE_TOKEN_EXPIRED = 4001  # docs/protocol.md: renew the token and connect again
MAX_CHANNEL_CHARS = 100  # a longer name is refused as a bad message, which names no channel to drop


def websocket_url(url: str) -> str:
    """`http://host:port` (or ws://...) -> `ws://host:port/ws`."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    path = parts.path if parts.path.endswith("/ws") else parts.path.rstrip("/") + "/ws"
    return urlunsplit((scheme, parts.netloc, path, "", ""))


class State(enum.Enum):
    IDLE = "idle"  # never connected yet
    OPEN = "open"
    RECONNECTING = "reconnecting"
    CLOSED = "closed"  # close() was called: iteration ends
    FAILED = "failed"  # Unauthorized or ConnectionFailed: every call raises it again


class GatewayClient:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        fmt: Format = "json",
        max_backoff: float = 15.0,
        *,
        token_provider: TokenProvider | None = None,
        max_attempts: int | None = None,
        compression: bool = True,
    ) -> None:
        """`token`: the first token (None: ask `token_provider`). `max_attempts`: failed connection attempts in
        a row before `ConnectionFailed` (None: retry forever). `compression`: offer permessage-deflate, as
        browsers and python-websockets do (a feed's JSON shrinks to a fifth or so); False: plain frames."""
        if max_attempts is not None and max_attempts < 1:
            raise ValueError("max_attempts must be at least 1 (or None: forever)")
        self.url = websocket_url(url)
        self.tokens = Tokens(token, token_provider)
        self.format: Format = fmt
        self.dialer = Dialer(self.url, fmt, self.tokens, max_backoff, max_attempts, self._closed, compression)
        self.subscriptions = ClientChannels(max_backoff)
        self.reconnects = 0
        self._state = State.IDLE
        self._failure: GatewayError | None = None
        self._ws: websockets.ClientConnection | None = None
        self._opening = asyncio.Lock()

    @property
    def channels(self) -> dict[str, Followed]:
        return self.subscriptions.followed

    @property
    def refused(self) -> dict[str, ChannelRefused]:
        """Channels dropped for good, and why."""
        return self.subscriptions.refused

    @property
    def max_backoff(self) -> float:
        return self.dialer.max_backoff

    @property
    def max_attempts(self) -> int | None:
        return self.dialer.max_attempts

    @property
    def token(self) -> str | None:
        return self.tokens.current

    @property
    def state(self) -> State:
        return self._state

    @state.setter
    def state(self, state: State) -> None:
        if state is not self._state:
            log.debug("%s: %s -> %s", self.url, self._state.value, state.value)
            self._state = state

    def _closed(self) -> bool:
        """A method, not a comparison: the state changes across awaits, which type checkers do not see."""
        return self._state is State.CLOSED

    async def __aenter__(self) -> Self:
        await self._ready()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self.state is not State.FAILED:
            self.state = State.CLOSED
        self.dialer.closing.set()
        if self._ws is not None:
            await self._ws.close()

    async def subscribe(self, channel: str) -> None:
        """Ask for a channel (again, even one refused before); its snapshot, or the server's refusal, comes
        through iteration."""
        if len(channel) > MAX_CHANNEL_CHARS:
            raise ChannelRefused(channel, "bad_channel", f"channel names are at most {MAX_CHANNEL_CHARS} characters")
        await self._ready()
        if self._closed():
            raise RuntimeError("subscribe on a closed client")
        state = self.subscriptions.follow(channel)
        if not await self._send(Subscribe(channel=channel, cursor=state.cursor)):
            self.subscriptions.ask_again(channel)  # reconnecting: the reader sends it once connected

    async def unsubscribe(self, channel: str) -> None:
        self.subscriptions.unfollow(channel)
        await self._send(Unsubscribe(channel=channel))

    async def ping(self) -> None:
        await self._send(Ping())

    def __aiter__(self) -> GatewayClient:
        return self

    async def __anext__(self) -> ServerMessages:
        """The next message for the caller; reconnects and resubscribes on the way."""
        while True:
            ws = await self._ready()
            if ws is None:
                raise StopAsyncIteration
            await self._subscribe_due()
            timeout = self.subscriptions.until_due(asyncio.get_running_loop().time())
            try:
                raw = await (ws.recv() if timeout is None else asyncio.wait_for(ws.recv(), timeout))
            except TimeoutError:
                continue  # a channel is due to be asked for again
            except websockets.ConnectionClosed as closed:
                if self._closed():
                    raise StopAsyncIteration from None
                await self._failing(self._recover(closed))
                continue
            try:
                message = decode_server(raw, self.format)
            except msgspec.DecodeError as exc:  # a newer server's message: skip it rather than stop
                log.warning("skipped a message this client cannot read: %s", exc)
                continue
            if self._track(message):
                return message

    async def _ready(self) -> websockets.ClientConnection | None:
        """The socket to use (None once closed); connects the first time; raises the client's failure."""
        if self._failure is not None:
            raise self._failure
        if self.state is State.IDLE:
            async with self._opening:
                if self.state is State.IDLE:
                    await self._failing(self._open(first=True))
        return None if self._closed() else self._ws

    async def _failing(self, step: Awaitable[None]) -> None:
        """Await `step`; Unauthorized or ConnectionFailed from it ends the client."""
        try:
            await step
        except (Unauthorized, ConnectionFailed) as exc:
            self._failure = exc
            self.state = State.FAILED
            if self._ws is not None:
                await self._ws.close()
            raise

    async def _recover(self, closed: websockets.ConnectionClosed) -> None:
        """The socket closed under us: renew the token if it expired, connect again, resubscribe."""
        self.state = State.RECONNECTING
        code = closed.rcvd.code if closed.rcvd is not None else None
        # Not again for a token renewed by a recovery the caller cancelled: that one was never tried.
        if code == CLOSE_TOKEN_EXPIRED and not self.tokens.fresh:
            reason = closed.rcvd.reason if closed.rcvd is not None and closed.rcvd.reason else "token expired"
            await self.tokens.renew(reason)  # Unauthorized when it cannot
            log.info("%s closed the session (%s): renewed the token", self.url, reason)
        elif code != CLOSE_TOKEN_EXPIRED:
            log.info("%s: connection lost (%s): reconnecting", self.url, closed)
        hint = retry_after_ms(closed.rcvd.reason) if code == RESTART_CODE and closed.rcvd is not None else None
        await self._open(first=False, hint=None if hint is None else hint / 1000)
        if self._closed():
            return
        self.reconnects += 1
        # Sent by the read loop, each marked done once sent: a cancelled caller leaves none behind.
        self.subscriptions.ask_all_again()

    async def _open(self, first: bool, hint: float | None = None) -> None:
        """Connect (gateway.client.dial), after `hint` seconds if given; raises Unauthorized or ConnectionFailed."""
        ws = await self.dialer.dial(first, hint)
        if ws is not None:
            self._ws = ws
            self.state = State.OPEN

    def _track(self, m: ServerMessages) -> bool:
        """Whether the caller gets `m` (gaps and duplicates are the client's own business)."""
        return self.subscriptions.track(m, asyncio.get_running_loop().time())

    async def _subscribe_due(self) -> None:
        for name, cursor in self.subscriptions.due_now(asyncio.get_running_loop().time()):
            if not await self._send(Subscribe(channel=name, cursor=cursor)):
                return  # the connection is gone: the read loop finds out and reconnects
            self.subscriptions.asked(name)

    async def _send(self, message: Subscribe | Unsubscribe | Ping) -> bool:
        """False when there is no connection to send on (the read loop reconnects and subscribes again)."""
        if self._ws is None:
            return False
        try:
            await self._ws.send(_json.encode(message).decode() if self.format == "json" else _msgpack.encode(message))
        except websockets.ConnectionClosed:
            return False
        return True
