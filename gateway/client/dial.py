"""How a GatewayClient opens its socket: the handshake with the current token, tried again with backoff and
jitter (a busy node's `retry_after_ms` is honoured, and so is a restarting node's retry hint) until it works, the client closes, or `max_attempts`
attempts in a row failed. A 401 asks the token provider for a fresh token and tries it at once; a refusal that
retrying cannot fix (an origin, a path) ends it at the first attempt."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import msgspec
import websockets

from ..core.protocol import MSGPACK_SUBPROTOCOL, Format
from .channels import FIRST_DELAY, jitter
from .errors import ConnectionFailed
from .tokens import Tokens

log = logging.getLogger("gateway.client")  # the client's own log, whichever module of it writes


class Dialer:
    def __init__(
        self,
        url: str,
        fmt: Format,
        tokens: Tokens,
        max_backoff: float,
        max_attempts: int | None,
        closed: Callable[[], bool],
        compression: bool = True,
    ) -> None:
        self.url = url
        self.compression = compression  # offer permessage-deflate (the node deflates each shared frame once)
        self.format: Format = fmt
        self.tokens = tokens
        self.max_backoff = max_backoff
        self.max_attempts = max_attempts
        self.closed = closed  # the client was closed: stop trying
        self.closing = asyncio.Event()  # set when the client closes: cuts short a wait between attempts

    async def dial(self, first: bool, asked: float | None = None) -> websockets.ClientConnection | None:
        """A connected socket, or None if the client closed meanwhile; raises Unauthorized or ConnectionFailed.
        `asked`: the seconds a restarting node asked this connection to wait (gateway.core.restart)."""
        delay = FIRST_DELAY
        # After a drop, spread the reconnects of many clients: as the node asked, or by jitter.
        wait = 0.0 if first else asked if asked is not None else jitter(delay)
        attempts = 0
        while True:
            if wait:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.closing.wait(), wait)
            if self.closed():
                return None
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
                if self.closed():
                    await ws.close()
                    return None
                self.tokens.accepted()
                return ws
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
            compression="deflate" if self.compression else None,
        )


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
