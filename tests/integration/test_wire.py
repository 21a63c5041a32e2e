"""RFC 6455 at a real node, driven by clients this project did not write: `wsproto` reads what the node sends
while the test writes raw frames (valid and not), and Python `websockets` closes as a library would."""

from __future__ import annotations

import asyncio
import json
import os
import struct
from collections.abc import AsyncIterator

import pytest
import websockets
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Event, Ping, Request, TextMessage

from gateway.embedded import free_port
from tests.conftest import Process, Stack, spawn, wait_http
from tests.integration.conftest import Team
from tests.integration.test_abuse import eager_node, growth_while_never_reading  # noqa: F401  (a fixture)

VALID = [1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999]
INVALID = [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535]


def client_frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """A masked client frame (zero key: the payload stays as written), built by hand to say what a library won't."""
    first = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        head = bytes((first, 0x80 | n))
    elif n < 1 << 16:
        head = bytes((first, 0x80 | 126)) + struct.pack("!H", n)
    else:
        head = bytes((first, 0x80 | 127)) + struct.pack("!Q", n)
    return head + b"\0\0\0\0" + payload


class RawClient:
    """A socket that writes what the test says and reads the node's frames with wsproto."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.ws = WSConnection(ConnectionType.CLIENT)

    @classmethod
    async def connect(cls, port: int, token: str) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client = cls(reader, writer)
        writer.write(
            client.ws.send(
                Request(
                    host=f"127.0.0.1:{port}",
                    target="/ws",
                    extra_headers=[(b"authorization", f"Bearer {token}".encode())],
                )
            )
        )
        events = await client.events_until(lambda e: isinstance(e, AcceptConnection))
        assert isinstance(events[-1], AcceptConnection), events
        return client

    async def events_until(self, done: object, timeout: float = 10.0) -> list[Event]:
        """Events until one matches `done`, or the connection ends (the last is then CloseConnection or none)."""
        seen: list[Event] = []
        async with asyncio.timeout(timeout):
            while True:
                for event in self.ws.events():
                    seen.append(event)
                    if done(event):  # type: ignore[operator]
                        return seen
                data = await self.reader.read(65536)
                if not data:
                    return seen
                self.ws.receive_data(data)

    async def at_eof(self, timeout: float = 10.0) -> bool:
        """True when the node ended the TCP connection cleanly (FIN), False when it reset it."""
        try:
            async with asyncio.timeout(timeout):
                while await self.reader.read(65536):
                    pass
            return True
        except ConnectionResetError:
            return False

    def send_raw(self, data: bytes) -> None:
        self.writer.write(data)

    def close(self) -> None:
        self.writer.close()


async def closing_code(port: int, token: str, close_payload: bytes) -> tuple[int, bool]:
    """The code of the node's answer to our close frame, and whether it then closed the TCP connection cleanly."""
    client = await RawClient.connect(port, token)
    client.send_raw(client_frame(0x8, close_payload))
    code = await server_close_code(client)
    clean = await client.at_eof()
    client.close()
    return code, clean


async def server_close_code(client: RawClient) -> int:
    """The close code the node sent, read from the raw bytes after wsproto's handshake (wsproto refuses to report
    a code the RFC forbids, and such a code is exactly what must be caught)."""
    data = b""
    async with asyncio.timeout(10):
        while True:
            chunk = await client.reader.read(65536)
            assert chunk, f"no close frame came: {data!r}"
            data += chunk
            pos = 0
            while len(data) - pos >= 2:
                opcode, length = data[pos] & 0x0F, data[pos + 1] & 0x7F
                if length >= 126:
                    break  # only short frames come before a close here (pongs, errors)
                if len(data) - pos < 2 + length:
                    break
                if opcode == 0x8:
                    assert length >= 2, "the node's close frame carries a code"
                    return int.from_bytes(data[pos + 2 : pos + 4], "big")
                pos += 2 + length


@pytest.mark.parametrize("code", VALID)
async def test_a_valid_close_code_is_echoed_and_the_connection_ends(stack: Stack, team: Team, code: int) -> None:
    echoed, clean = await closing_code(stack.nodes[0].port, team.token, struct.pack("!H", code) + b"bye")
    assert echoed == code and clean


@pytest.mark.parametrize("code", INVALID)
async def test_an_invalid_close_code_is_answered_with_1002(stack: Stack, team: Team, code: int) -> None:
    echoed, clean = await closing_code(stack.nodes[0].port, team.token, struct.pack("!H", code))
    assert echoed == 1002 and clean


@pytest.mark.parametrize(
    ("payload", "answer"),
    [
        (b"", 1000),
        (b"\x03", 1002),
        (struct.pack("!H", 1000) + b"\xff\xfe", 1007),
        (struct.pack("!H", 4000) + "né".encode(), 4000),
    ],
    ids=["empty", "one-byte", "reason-not-utf8", "utf8-reason"],
)
async def test_close_payloads(stack: Stack, team: Team, payload: bytes, answer: int) -> None:
    echoed, clean = await closing_code(stack.nodes[0].port, team.token, payload)
    assert echoed == answer and clean


async def test_wsproto_sees_the_close_handshake_complete(stack: Stack, team: Team) -> None:
    """The same through wsproto's own close: it must see a close it accepts and the connection end."""
    client = await RawClient.connect(stack.nodes[0].port, team.token)
    client.send_raw(client.ws.send(CloseConnection(code=4000, reason="done")))
    events = await client.events_until(lambda e: isinstance(e, CloseConnection))
    assert isinstance(events[-1], CloseConnection) and events[-1].code == 4000
    assert await client.at_eof()
    client.close()


async def test_messages_before_a_broken_frame_are_handled_then_the_connection_fails(stack: Stack, team: Team) -> None:
    """A ping message, then an unmasked frame, then a close, in one write: the ping is answered, the broken frame
    fails the connection with 1002, and the node closes its end at once (the close after it is not read)."""
    client = await RawClient.connect(stack.nodes[0].port, team.token)
    ping = client_frame(0x1, json.dumps({"type": "ping", "id": 7}).encode())
    unmasked = bytes((0x81, 2)) + b"hi"
    client.send_raw(ping + unmasked + client_frame(0x8, struct.pack("!H", 1000)))
    events = await client.events_until(lambda e: isinstance(e, CloseConnection))
    pongs = [json.loads(e.data) for e in events if isinstance(e, TextMessage)]
    assert [(p["type"], p["id"]) for p in pongs] == [("pong", 7)]
    assert isinstance(events[-1], CloseConnection) and events[-1].code == 1002
    assert await client.at_eof()
    client.close()


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (bytes((0x81, 0x80 | 127)) + struct.pack("!Q", 1 << 63) + b"\0\0\0\0", 1002),  # the 64-bit length's top bit
        (client_frame(0x1, b"x" * (65 << 10)), 1009),  # past the 64 KiB message bound
    ],
    ids=["length-top-bit", "oversize"],
)
async def test_a_bad_length_fails_the_connection_and_nothing_after_it_is_read(
    stack: Stack, team: Team, frame: bytes, code: int
) -> None:
    client = await RawClient.connect(stack.nodes[0].port, team.token)
    # What follows the bad frame would parse as a subscribe if the node kept reading.
    trailing = client_frame(0x1, json.dumps({"type": "subscribe", "channel": f"team:{team.id}"}).encode())
    client.send_raw(frame + trailing * 4)
    events = await client.events_until(lambda e: isinstance(e, CloseConnection))
    assert isinstance(events[-1], CloseConnection) and events[-1].code == code
    assert not [e for e in events if isinstance(e, TextMessage)], "the node answered bytes it should not have read"
    assert await client.at_eof()
    client.close()


async def test_python_websockets_closes_cleanly_with_its_own_code(stack: Stack, team: Team) -> None:
    async with websockets.connect(
        stack.nodes[0].ws, additional_headers={"Authorization": f"Bearer {team.token}"}
    ) as ws:
        await ws.close(4000, "finished")
    received = ws.protocol.close_rcvd
    assert ws.close_code == 4000 and received is not None and received.code == 4000


@pytest.fixture
async def brisk_node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Process]:
    """A node that pings every second (the default is 20 s)."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_KEEPALIVE": "1",
    }
    node = spawn("node-brisk", ["serve", "--port", str(port)], env, tmp_path_factory.mktemp("brisk"), port)
    try:
        await asyncio.to_thread(wait_http, node)
        yield node
    finally:
        node.stop()


async def test_a_blind_pong_does_not_keep_a_dead_peer_alive(brisk_node: Process, team: Team) -> None:
    """A client that never reads the node's pings but sends pongs of its own is closed at the keepalive (1011),
    while one that answers the pings (Python websockets does, by itself) stays."""
    client = await RawClient.connect(brisk_node.port, team.token)
    async with websockets.connect(
        brisk_node.ws, additional_headers={"Authorization": f"Bearer {team.token}"}, ping_interval=None
    ) as answering:
        async with asyncio.timeout(20):
            code = None
            while code is None:
                for payload in (b"", b"gw", b"\0" * 8):
                    client.send_raw(client_frame(0xA, payload))
                try:
                    events = await client.events_until(lambda e: isinstance(e, CloseConnection), timeout=0.5)
                except TimeoutError:
                    continue
                closes = [e for e in events if isinstance(e, CloseConnection)]
                code = closes[-1].code if closes else None
                assert closes or not events or all(isinstance(e, Ping) for e in events)
        assert code == 1011
        assert answering.state is websockets.State.OPEN  # several pings later, answered each time
        await answering.send(json.dumps({"type": "ping", "id": 1}))
        assert json.loads(await asyncio.wait_for(answering.recv(), 10))["type"] == "pong"
    client.close()


async def test_a_node_s_pings_are_spread_over_its_interval(brisk_node: Process, team: Team) -> None:
    """Each connection is pinged on its own slice of the interval, not all in one round: one round at 16,000
    connections was one turn of the event loop writing 16,000 pings, which every delivery waited behind. Each
    tick's ping carries a token of its own, so the connections' first pings tell how many ticks they came in."""
    clients = [await RawClient.connect(brisk_node.port, team.token) for _ in range(20)]
    try:

        async def first_ping(client: RawClient) -> bytes:
            events = await client.events_until(lambda e: isinstance(e, Ping), timeout=20)
            assert isinstance(events[-1], Ping), events
            return bytes(events[-1].payload)

        tokens = await asyncio.gather(*(first_ping(c) for c in clients))
    finally:
        for client in clients:
            client.close()
    # Dealt in turn to the ten slices of a one-second interval: ten ticks, two connections each.
    assert len(set(tokens)) >= 5, f"20 connections' first pings came in {len(set(tokens))} ticks"


async def test_a_ping_flood_is_rate_limited_like_messages_and_closed_with_4029(stack: Stack, team: Team) -> None:
    client = await RawClient.connect(stack.nodes[1].port, team.token)
    code = asyncio.create_task(server_close_code(client))
    ping = client_frame(0x9, b"p" * 125)
    try:
        async with asyncio.timeout(60):
            for _ in range(300):  # 300,000 pings, or until the node ends it
                if code.done():
                    break
                client.writer.write(ping * 1000)
                await client.writer.drain()
    except (ConnectionError, OSError):
        pass  # closed by the node while we wrote
    assert await code == 4029
    client.close()
    assert "Traceback" not in stack.nodes[1].output(), stack.nodes[1].tracebacks()


async def test_pongs_a_client_never_reads_stay_within_its_bound(eager_node: Process, team: Team) -> None:  # noqa: F811  (a pytest fixture)
    """300,000 websocket pings and never a read grew the node by 50 MiB: every pong was written outside any
    bound. Pongs are replies now: past the bound they are refused, then the client is closed as slow."""
    grown = await growth_while_never_reading(eager_node, team, client_frame(0x9, b"p" * 125) * 1000, 300)
    assert grown < 8 * 1024, f"the node grew {grown} KiB for one client that never reads"
