"""What the node answers to permessage-deflate offers (RFC 7692), through websockets' own handshake code."""

from __future__ import annotations

import pytest
from websockets.datastructures import Headers
from websockets.http11 import Request
from websockets.server import ServerProtocol

from gateway.web.websocket.deflate import SharedDeflate, shared_window

BOTH = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"


def negotiate(*offers: str) -> tuple[str | None, int | None]:
    """The response's Sec-WebSocket-Extensions, and the window the node's link would deflate with."""
    headers = Headers(
        [
            ("Host", "x"),
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
        ]
        + [("Sec-WebSocket-Extensions", offer) for offer in offers]
    )
    protocol = ServerProtocol(extensions=[SharedDeflate()])
    response = protocol.accept(Request("/ws", headers))
    assert response.status_code == 101
    return response.headers.get("Sec-WebSocket-Extensions"), shared_window(protocol.extensions)


@pytest.mark.parametrize(
    ("offer", "answer", "window"),
    [
        ("permessage-deflate", BOTH, 15),  # Firefox
        ("permessage-deflate; client_max_window_bits", BOTH, 15),  # Chromium, Node ws, Python websockets
        ("permessage-deflate; client_max_window_bits=10", BOTH, 15),  # the node inflates any client window
        ("permessage-deflate; server_no_context_takeover", BOTH, 15),
        ("permessage-deflate; client_no_context_takeover", BOTH, 15),
        ("permessage-deflate; server_max_window_bits=15", BOTH + "; server_max_window_bits=15", 15),
        ("permessage-deflate; server_max_window_bits=10", BOTH + "; server_max_window_bits=10", 10),
        (
            "permessage-deflate; server_max_window_bits=9; client_max_window_bits",
            BOTH + "; server_max_window_bits=9",
            9,
        ),
    ],
)
def test_an_offer_is_answered_without_context_takeover_either_way(offer: str, answer: str, window: int) -> None:
    assert negotiate(offer) == (answer, window)


@pytest.mark.parametrize(
    "offer",
    [
        "permessage-deflate; server_max_window_bits=8",  # zlib cannot deflate with a 256-byte window
        "permessage-deflate; server_max_window_bits",  # needs a value
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=010",  # no leading zeroes
        "permessage-deflate; client_max_window_bits=7",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; mystery",
        "x-webkit-deflate-frame",
    ],
)
def test_an_offer_the_node_cannot_take_leaves_the_connection_uncompressed(offer: str) -> None:
    assert negotiate(offer) == (None, 0)


def test_a_declined_offer_falls_back_to_the_clients_next_one() -> None:
    offers = "permessage-deflate; server_max_window_bits=8, permessage-deflate; client_max_window_bits"
    assert negotiate(offers) == (BOTH, 15)
    assert negotiate("permessage-deflate; server_max_window_bits=8", "permessage-deflate") == (BOTH, 15)


def test_only_one_offer_is_accepted() -> None:
    assert negotiate("permessage-deflate, permessage-deflate; server_max_window_bits=12") == (BOTH, 15)


def test_a_connection_compressed_with_context_takeover_is_not_the_nodes_to_write() -> None:
    """uvicorn's own settings keep a compression context per connection: such a link could not take shared frames."""
    from websockets.extensions.permessage_deflate import ServerPerMessageDeflateFactory

    protocol = ServerProtocol(extensions=[ServerPerMessageDeflateFactory(server_max_window_bits=12)])
    headers = Headers(
        [
            ("Host", "x"),
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Extensions", "permessage-deflate"),
        ]
    )
    protocol.accept(Request("/ws", headers))
    assert protocol.extensions and shared_window(protocol.extensions) is None
