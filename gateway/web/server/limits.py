"""What a request may cost before the app sees it, and the refusals that say it went past.

A request is answered and its connection closed

- 414 when its target (the URL) passes `max_request_line_bytes`,
- 431 past `max_headers` header lines or `max_header_bytes` of them, counted as bytes arrive (so one header
  that never ends is caught too),
- 408 when its headers are not complete `header_timeout` after the connection opened (or after the request's
  first byte, on a kept-alive connection), or its body `body_timeout` after the headers,

and while `max_pending` connections are still waiting for their headers, a new connection is told 503 and
closed at once. An answer its reader takes nothing of for `send_stall` seconds is cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus

import msgspec

from ...config import Settings

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
    keep_alive: float = 5.0  # an idle kept-alive connection is closed after this

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
    """How many of one server's connections are waiting for something (a request's headers; or open, on the
    health port)."""

    def __init__(self) -> None:
        self.count = 0


class OverLimit(Exception):
    """Raised in a parser callback: httptools stops parsing and re-raises it as the context of its own error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def answer(
    status: int,
    code: str,
    message: str,
    default_headers: list[tuple[bytes, bytes]] | None = None,
    retry_after_ms: int | None = None,
) -> bytes:
    """A complete response that closes the connection, its body the JSON error the app's own refusals use."""
    return response(status, error_body(code, message, retry_after_ms), default_headers or [], retry_after_ms)


def error_body(code: str, message: str, retry_after_ms: int | None = None) -> bytes:
    """The JSON error the app's own refusals use."""
    error: dict[str, str | int] = {"error": code, "message": message}
    if retry_after_ms is not None:
        error["retry_after_ms"] = retry_after_ms
    return msgspec.json.encode(error)


def response(
    status: int,
    body: bytes,
    default_headers: list[tuple[bytes, bytes]],
    retry_after_ms: int | None = None,
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> bytes:
    """A JSON response that closes the connection."""
    head = [b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode())]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head += [name + b": " + value + b"\r\n" for name, value in headers]
    if retry_after_ms is not None:
        head.append(b"retry-after: %d\r\n" % max(1, round(retry_after_ms / 1000)))
    head.append(b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body))
    return b"".join(head) + body
