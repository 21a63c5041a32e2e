"""A websocket handshake answered as one of its form was: websockets' `ServerProtocol.accept` checks and negotiates
each distinct form of request once (the headers it reads, but the key), and the node keeps what it answered. A
request of a form already accepted gets the same 101 with its own Sec-WebSocket-Accept and the current Date, and
no `Request`, `Headers`, offer parsing or negotiation is made for it: a reconnect storm's clients all send the same
form. Anything else (a key that is not 16 bytes of base64, or not one key; a form not accepted before) goes to
websockets, which answers or refuses it as always.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import time
from collections.abc import Sequence
from email.utils import formatdate
from typing import NamedTuple

from websockets.datastructures import Headers
from websockets.http11 import Request
from websockets.server import ServerProtocol

from ..websocket.deflate import shared_window

Form = tuple[tuple[bytes, bytes], ...]

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455 section 1.3
FORMS = 256  # forms kept (a client naming ever new offers only reaches websockets every time, as before)
_KEY = b"sec-websocket-key"
# The request headers websockets' accept reads (Origin only to refuse two of them): the others take no part.
READ = frozenset(
    {
        b"connection",
        b"upgrade",
        _KEY,
        b"sec-websocket-version",
        b"sec-websocket-extensions",
        b"sec-websocket-protocol",
        b"origin",
    }
)


class Answer(NamedTuple):
    """What to send for a handshake: a 101 (with what it negotiated) or websockets' refusal."""

    status: int  # 500: websockets negotiated an extension the node does not offer (a bug)
    wire: bytes
    subprotocol: str | None = None
    deflate: int = 0  # permessage-deflate's window bits for what the node sends; 0: not negotiated


class Accepted:
    """A form's 101, between its Date and its Sec-WebSocket-Accept, and what was negotiated."""

    __slots__ = ("head", "middle", "tail", "subprotocol", "deflate")

    def __init__(self, head: bytes, middle: bytes, tail: bytes, subprotocol: str | None, deflate: int) -> None:
        self.head, self.middle, self.tail = head, middle, tail
        self.subprotocol = subprotocol
        self.deflate = deflate

    def answer(self, key: bytes, date: bytes) -> bytes:
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        return b"".join((self.head, date, self.middle, accept, self.tail))


class Handshakes:
    """The server's answers, per form (one event loop's: no lock)."""

    def __init__(self, answerer: ServerProtocol) -> None:
        self.answerer = answerer
        self.forms: dict[Form, Accepted] = {}
        self._second = -1
        self._date = b""

    def answer(self, url: bytes, headers: Sequence[tuple[bytes, bytes]]) -> Answer:
        form, key = _form(headers)
        if key is not None and (found := self.forms.get(form)) is not None:
            return Answer(101, found.answer(key, self.date()), found.subprotocol, found.deflate)
        handshake = self.answerer
        reply = handshake.accept(Request(url.decode("latin-1"), Headers(_text(headers))))
        wire = reply.serialize()
        if reply.status_code != 101:
            return Answer(reply.status_code, wire)
        window = shared_window(handshake.extensions)
        if window is None:  # only SharedDeflate is offered to websockets: anything else is a bug here
            return Answer(500, b"")
        accepted = _accepted(wire, reply.headers, handshake.subprotocol, window)
        if key is not None and accepted is not None:
            if len(self.forms) >= FORMS:
                self.forms.clear()
            self.forms[form] = accepted
        return Answer(101, wire, handshake.subprotocol, window)

    def date(self) -> bytes:
        now = int(time.time())
        if now != self._second:
            self._second, self._date = now, formatdate(now, usegmt=True).encode()
        return self._date


def _form(headers: Sequence[tuple[bytes, bytes]]) -> tuple[Form, bytes | None]:
    """The headers websockets reads, but the key; and the key, when it is one, 16 bytes of base64."""
    form: list[tuple[bytes, bytes]] = []
    key: bytes | None = None
    keys = 0
    for name, value in headers:
        if name not in READ:
            continue
        if name == _KEY:
            key, keys = value, keys + 1
        else:
            form.append((name, value))
    if keys != 1 or key is None or not _is_key(key):
        return tuple(form), None
    return tuple(form), key


def _is_key(key: bytes) -> bool:
    try:
        return len(base64.b64decode(key, validate=True)) == 16
    except binascii.Error:
        return False


def _text(headers: Sequence[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    return [(name.decode(), value.decode("latin-1")) for name, value in headers if name in READ]


def _accepted(wire: bytes, headers: Headers, subprotocol: str | None, window: int) -> Accepted | None:
    """`wire` cut around its Date and Sec-WebSocket-Accept values; None if it does not have one of each."""
    dates, accepts = headers.get_all("Date"), headers.get_all("Sec-WebSocket-Accept")
    if len(dates) != 1 or len(accepts) != 1:
        return None
    date_line, accept_line = (
        f"\r\nDate: {dates[0]}\r\n".encode(),
        f"\r\nSec-WebSocket-Accept: {accepts[0]}\r\n".encode(),
    )
    at, to = wire.find(date_line), wire.find(accept_line)
    if at < 0 or to < at:
        return None
    date_at, accept_at = at + len(b"\r\nDate: "), to + len(b"\r\nSec-WebSocket-Accept: ")
    head, middle = wire[:date_at], wire[date_at + len(dates[0]) : accept_at]
    return Accepted(head, middle, wire[accept_at + len(accepts[0]) :], subprotocol, window)
