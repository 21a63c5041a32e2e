"""A Python client for the gateway's feeds: connect with a token, subscribe, iterate over messages.

    async with GatewayClient("http://127.0.0.1:8000", token_provider=get_token) as client:
        await client.subscribe("team-jobs:7")
        async for message in client:
            ...  # Snapshot, Batch, Summary, Notice, Glow, ... (msgspec Structs from gateway.core.protocol)

Connecting, the first time as after a drop, is retried with backoff and jitter (a busy node's `retry_after_ms`
is honoured) until it works, or `max_attempts` attempts in a row failed: `ConnectionFailed`. After a drop it
resumes every channel from its cursor; on `resync`, or a sequence that does not follow, it subscribes again
without a cursor and yields the fresh snapshot, page by page (the checks are gateway.core.follower's).
A `token_provider` (a plain or async function; `token_from_command("gateway token --user 1")` runs a command)
is asked again after a 401 at the handshake or a close 4001; without one, or when its fresh token is refused
too, `Unauthorized` is raised.

Errors (gateway.client_errors, all `GatewayError`) are raised from iteration, and `Unauthorized` and
`ConnectionFailed` also from `subscribe` and `async with`; they end the client. A channel the server refuses
for good (`Forbidden`, or `ChannelRefused` for a bad name or too many subscriptions) is dropped, recorded in
`client.refused` and raised from iteration once (a name over 100 characters by `subscribe` itself); iterating
again goes on with the other channels. Other `error` messages are yielded (`rate_limited`, `bad_message`, and
`unavailable`/`internal` about a channel, which the client asks for again after a backoff).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable
from typing import Self
from urllib.parse import urlsplit, urlunsplit

import msgspec
import websockets

from .client_channels import FIRST_DELAY, ClientChannels, Followed, jitter
from .client_errors import ChannelRefused, ConnectionFailed, Forbidden, GatewayError, Unauthorized
from .client_tokens import TokenProvider, Tokens, token_from_command
from .core.protocol import (
    MSGPACK_SUBPROTOCOL,
    Format,
    Ping,
    ServerMessages,
    Subscribe,
    Unsubscribe,
    decode_server,
)

__all__ = [
    "ChannelRefused", "ConnectionFailed", "Forbidden", "GatewayClient", "GatewayError", "State", "TokenProvider",
    "Unauthorized", "token_from_command", "websocket_url",
]  # fmt: skip

log = logging.getLogger(__name__)

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
    ) -> None:
        """`token`: the first token (None: ask `token_provider`). `max_attempts`: failed connection attempts in
        a row before `ConnectionFailed` (None: retry forever)."""
        if max_attempts is not None and max_attempts < 1:
            raise ValueError("max_attempts must be at least 1 (or None: forever)")
        self.url = websocket_url(url)
        self.tokens = Tokens(token, token_provider)
        self.format: Format = fmt
        self.max_backoff = max_backoff
        self.max_attempts = max_attempts
        self.subscriptions = ClientChannels(max_backoff)
        self.reconnects = 0
        self._state = State.IDLE
        self._failure: GatewayError | None = None
        self._ws: websockets.ClientConnection | None = None
        self._opening = asyncio.Lock()
        self._closing = asyncio.Event()  # cuts short a wait between connection attempts

    @property
    def channels(self) -> dict[str, Followed]:
        return self.subscriptions.followed

    @property
    def refused(self) -> dict[str, ChannelRefused]:
        """Channels dropped for good, and why."""
        return self.subscriptions.refused

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
        self._closing.set()
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
        await self._open(first=False)
        if self._closed():
            return
        self.reconnects += 1
        # Sent by the read loop, each marked done once sent: a cancelled caller leaves none behind.
        self.subscriptions.ask_all_again()

    async def _open(self, first: bool) -> None:
        """Connect, with backoff and jitter between attempts; raises Unauthorized or ConnectionFailed."""
        delay = FIRST_DELAY
        wait = 0.0 if first else jitter(delay)  # after a drop, spread the reconnects of many clients
        attempts = 0
        while True:
            if wait:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._closing.wait(), wait)
            if self._closed():
                return
            attempts += 1
            hint: float | None = None
            token = await self.tokens.get()  # a provider's own errors reach the caller as they are
            try:
                ws = await self._handshake(token)
            except websockets.InvalidStatus as exc:
                status, body = exc.response.status_code, _json_body(exc)
                if status == 401:
                    await self.tokens.renew(str(body.get("message") or "unauthorized"))  # or Unauthorized
                    attempts, wait = attempts - 1, 0.0  # not the node's fault: try the new token at once
                    continue
                reason = f"HTTP {status}" + (f" {body['error']}" if "error" in body else "")
                if status == 503:
                    hint = _retry_after(exc, body)
                elif status != 429 and status < 500:  # an origin or a path that retrying will not fix
                    raise ConnectionFailed(self.url, attempts, f"{reason}: {body.get('message', 'refused')}") from None
            except websockets.InvalidURI as exc:
                raise ConnectionFailed(self.url, attempts, str(exc)) from None
            except (OSError, TimeoutError, websockets.InvalidHandshake) as exc:
                reason = _describe(exc)
            else:
                if self._closed():
                    await ws.close()
                    return
                self._ws = ws
                self.tokens.accepted()
                self.state = State.OPEN
                return
            if self.max_attempts is not None and attempts >= self.max_attempts:
                raise ConnectionFailed(self.url, attempts, reason)
            wait = hint if hint is not None else jitter(delay)
            delay = min(delay * 2, self.max_backoff)
            log.warning("cannot connect to %s (%s): trying again in %.1f s", self.url, reason, wait)

    async def _handshake(self, token: str) -> websockets.ClientConnection:
        subprotocols = [MSGPACK_SUBPROTOCOL] if self.format == "msgpack" else None
        return await websockets.connect(
            self.url,
            additional_headers={"Authorization": f"Bearer {token}"},
            subprotocols=subprotocols,  # type: ignore[arg-type]
            max_size=8 << 20,
            compression=None,
        )

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


def _json_body(exc: websockets.InvalidStatus) -> dict[str, object]:
    try:
        body = msgspec.json.decode(exc.response.body or b"")
    except msgspec.DecodeError:
        return {}
    return body if isinstance(body, dict) else {}


def _retry_after(exc: websockets.InvalidStatus, body: dict[str, object]) -> float | None:
    """A busy node's delay: `retry_after_ms` in the body, else the `Retry-After` header (seconds)."""
    for value, scale in ((body.get("retry_after_ms"), 1000), (exc.response.headers.get("Retry-After"), 1)):
        try:
            return float(value) / scale  # type: ignore[arg-type]
        except (TypeError, ValueError):
            continue
    return None


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError) or "Connect call failed" in str(exc):
        return "connection refused"
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
