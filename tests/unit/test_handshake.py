"""A handshake of a form answered before (gateway.web.server.handshake): the same 101 websockets gives, with its own
key's answer, and whatever else is still websockets' to answer or refuse."""

from __future__ import annotations

import base64
import hashlib
import os

from gateway.core.protocol import MSGPACK_SUBPROTOCOL
from gateway.web.server.handshake import GUID, Handshakes
from gateway.web.server.upgrade import answerer


def request(key: bytes, *extra: tuple[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    return [
        (b"host", b"node"),
        (b"upgrade", b"websocket"),
        (b"connection", b"Upgrade"),
        (b"sec-websocket-key", key),
        (b"sec-websocket-version", b"13"),
        (b"authorization", b"Bearer " + os.urandom(8).hex().encode()),  # no part of the form
        *extra,
    ]


def new_key() -> bytes:
    return base64.b64encode(os.urandom(16))


def websockets_answer(headers: list[tuple[bytes, bytes]], compression: bool = True) -> bytes:
    return Handshakes(answerer(compression)).answer(b"/ws", headers).wire


def without_date(wire: bytes) -> bytes:
    return b"\r\n".join(line for line in wire.split(b"\r\n") if not line.startswith(b"Date: "))


def test_a_form_answered_before_gets_the_101_websockets_gives_with_its_own_accept() -> None:
    offers = [(b"sec-websocket-protocol", MSGPACK_SUBPROTOCOL.encode()), (b"sec-websocket-extensions", b"x")]
    for extra in ([], offers[:1], [(b"sec-websocket-extensions", b"permessage-deflate; server_max_window_bits=10")]):
        handshakes = Handshakes(answerer(True))
        first = handshakes.answer(b"/ws", request(new_key(), *extra))
        key = new_key()
        again = handshakes.answer(b"/ws?token=t", request(key, *extra))
        assert len(handshakes.forms) == 1
        assert (again.status, again.subprotocol, again.deflate) == (first.status, first.subprotocol, first.deflate)
        assert without_date(again.wire) == without_date(websockets_answer(request(key, *extra)))
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        assert b"\r\nSec-WebSocket-Accept: " + accept + b"\r\n" in again.wire
        assert b"\r\nDate: " + handshakes.date() + b"\r\n" in again.wire
    handshakes = Handshakes(answerer(True))
    plain, unknown = (handshakes.answer(b"/ws", request(new_key(), *extra)) for extra in ([], offers[1:]))
    assert (plain.status, unknown.status, len(handshakes.forms)) == (101, 101, 2)  # an offer declined is its own form


def test_a_bad_key_in_a_known_form_is_still_refused_by_websockets() -> None:
    handshakes = Handshakes(answerer(False))
    assert handshakes.answer(b"/ws", request(new_key())).status == 101
    for key in (b"not base64!", base64.b64encode(b"fifteen bytes.."), b""):
        refused = handshakes.answer(b"/ws", request(key))
        assert refused.status == 400 and refused.wire == websockets_answer(request(key), False)
    two_keys = request(new_key(), (b"sec-websocket-key", new_key()))
    assert handshakes.answer(b"/ws", two_keys).status == 400
    assert len(handshakes.forms) == 1


def test_forms_are_bounded() -> None:
    handshakes = Handshakes(answerer(False))
    for n in range(300):
        assert handshakes.answer(b"/ws", request(new_key(), (b"origin", b"https://%d.example" % n))).status == 101
    assert 0 < len(handshakes.forms) <= 256
