"""The libraries whose private parts the gateway leans on: each is inside the range pyproject.toml pins, and the
parts are there. A new major version (or any version past the pin) fails here, loudly, instead of misbehaving
in production; tests/unit/test_http_protocol.py names uvicorn's and httptools' parts."""

from __future__ import annotations

import asyncio
import importlib.metadata
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from uvicorn.config import Config
from uvicorn.server import ServerState
from websockets.server import ServerProtocol

from gateway.web.direct import DirectProtocol

ROOT = Path(__file__).resolve().parents[2]
PINNED = ["uvicorn", "websockets", "redis"]  # gateway.web.http and .direct, gateway.core.wsframe, gateway.bus
HANDSHAKE = (
    b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
)


def pins() -> dict[str, Requirement]:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {r.name: r for r in map(Requirement, dependencies)}


@pytest.mark.parametrize("name", PINNED)
def test_the_installed_version_is_inside_the_pinned_range(name: str) -> None:
    requirement = pins()[name]
    installed = Version(importlib.metadata.version(name))
    assert requirement.specifier, f"{name} has no upper bound in pyproject.toml: pin the range the tests pass on"
    assert any(spec.operator == "<" for spec in requirement.specifier), f"{name}: pin an upper bound in pyproject.toml"
    assert requirement.specifier.contains(installed, prereleases=True), (
        f"{name} {installed} is outside the range pyproject.toml pins ({requirement.specifier}): the gateway uses"
        f" its private parts. Run this file and tests/unit/test_http_protocol.py against it before moving the pin."
    )


def test_websockets_c_apply_mask_is_there_and_unmasks() -> None:
    from websockets.speedups import apply_mask  # gateway.core.wsframe falls back to Python's, many times slower

    from gateway.core import wsframe

    assert wsframe.apply_mask is apply_mask
    assert apply_mask(bytes([1, 2, 3, 4, 5]), bytes([1, 2, 3, 4])) == bytes([0, 0, 0, 0, 4])


def test_a_server_protocol_keeps_unparsed_bytes_in_its_readers_buffer() -> None:
    """DirectProtocol.adopt hands `conn.reader.buffer` (bytes after the handshake not yet parsed) to the link."""
    protocol = ServerProtocol()
    protocol.receive_data(HANDSHAKE + b"\x81")  # the first byte of a frame
    assert isinstance(protocol.reader.buffer, bytearray), "websockets' StreamReader no longer has a bytearray .buffer"
    assert bytes(protocol.reader.buffer) == b"\x81", "websockets no longer leaves an incomplete frame in reader.buffer"
    # gateway.web.direct sets the extensions offered, and reads those the handshake agreed on
    assert hasattr(protocol, "available_extensions"), "websockets' ServerProtocol no longer has .available_extensions"
    assert isinstance(getattr(protocol, "extensions", None), list), (
        "websockets' ServerProtocol no longer has a list .extensions"
    )


async def test_uvicorns_sans_io_protocol_runs_a_websockets_server_protocol() -> None:
    config = Config(lambda scope, receive, send: None, ws="gateway.web.direct:DirectProtocol", log_config=None)
    config.load()
    protocol = DirectProtocol(config, ServerState(), {}, asyncio.get_running_loop())
    assert isinstance(protocol.conn, ServerProtocol), (
        f"uvicorn's sans-I/O protocol's .conn is now {type(protocol.conn)}"
    )
    for name in (
        "handshake_complete",
        "close_sent",
        "disconnected",
        "read_paused",
        "queue",
        "connections",
        "stop_keepalive",
    ):
        assert hasattr(protocol, name), (
            f"uvicorn's WebSocketsSansIOProtocol no longer has .{name} (gateway.web.direct uses it)"
        )
