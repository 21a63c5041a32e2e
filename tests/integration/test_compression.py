"""permessage-deflate (RFC 7692) at a real node, with clients this project did not write: Python `websockets`
and Node `ws` (both offer compression by default), and raw frames read and written by hand or with `wsproto`.

What must hold: compression is negotiated without context takeover either way (the response says so); what a
compressing client decodes is exactly what a plain client of the same channel receives; the node's compressed
frames inflate each on its own and are the same bytes for every compressing subscriber; compressed client
messages are inflated, within the message bound (a decompression bomb is closed with 1009); and the node's own
link and the ASGI fallback (uvicorn's own protocol) close with the same codes for the same bad input, without a
traceback in either's log.
"""

from __future__ import annotations

import asyncio
import json
import os
import struct
import subprocess
import sys
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import websockets
from wsproto.events import AcceptConnection, Request, TextMessage
from wsproto.extensions import PerMessageDeflate

from gateway.embedded import free_port
from tests.conftest import Process, Stack, wait_http
from tests.integration.conftest import Team, insert_jobs
from tests.integration.test_wire import RawClient, client_frame, server_close_code

ROOT = Path(__file__).resolve().parents[2]
NODE_CLIENT = Path(__file__).with_name("ws_node_client.js")
NO_TAKEOVER = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
OFFER = "permessage-deflate; client_max_window_bits"  # what Chromium, Node ws and Python websockets send

Messages = list[dict[str, Any]]


def comparable(messages: Messages) -> Messages:
    """Messages as two clients of one channel must both see them: a snapshot page's `time` is its own."""
    return [{k: v for k, v in m.items() if not (k == "time" and m["type"] == "snapshot")} for m in messages]


def statuses(messages: Messages) -> dict[int, str]:
    seen: dict[int, str] = {}
    for m in messages:
        for job in m.get("jobs", ()):
            seen[job["id"]] = job["status"]
    return seen


def all_at(status: str, ids: list[int]) -> Callable[[Messages], bool]:
    return lambda messages: all(statuses(messages).get(i) == status for i in ids)


async def collect(recv: Callable[[], Any], done: Callable[[Messages], bool], timeout: float = 30.0) -> Messages:
    """Messages until `done` says so (the first message at which it does is the last)."""
    messages: Messages = []
    async with asyncio.timeout(timeout):
        while not done(messages):
            messages.append(json.loads(await recv()))
    return messages


def subscribe(channel: str) -> str:
    return json.dumps({"type": "subscribe", "channel": channel})


def count_bytes(ws: websockets.ClientConnection) -> list[int]:
    """A running count of the bytes that come off the connection's socket, before any inflating."""
    count = [0]
    receive = ws.protocol.receive_data

    def counted(data: bytes) -> None:
        count[0] += len(data)
        receive(data)

    ws.protocol.receive_data = counted  # type: ignore[method-assign]
    return count


async def test_python_websockets_compresses_and_decodes_what_a_plain_client_receives(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    ids = await insert_jobs(pool, team, 120)
    channel = f"trajectory:{team.trajectory_id}"
    headers = {"Authorization": f"Bearer {team.token}"}
    node = stack.nodes[0]
    async with (
        websockets.connect(node.ws, additional_headers=headers) as deflating,
        websockets.connect(node.ws, additional_headers=headers, compression=None) as plain,
    ):
        assert deflating.response.headers["Sec-WebSocket-Extensions"] == NO_TAKEOVER
        assert "Sec-WebSocket-Extensions" not in plain.response.headers
        read = {deflating: count_bytes(deflating), plain: count_bytes(plain)}
        for ws in read:
            await ws.send(subscribe(channel))
        got = {}
        for ws in read:
            got[ws] = await collect(ws.recv, all_at("queued", ids))
        await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids)
        for ws in read:
            got[ws] += await collect(ws.recv, all_at("running", ids))
    assert comparable(got[deflating]) == comparable(got[plain])
    assert [m["type"] for m in got[plain]][:1] == ["snapshot"] and "batch" in [m["type"] for m in got[plain]]
    assert read[deflating][0] < read[plain][0] / 4, read  # the same messages in a quarter of the bytes


@pytest.fixture(scope="module")
def node_ws() -> str:
    """Node `ws`, from the benchmark's Node peers (installed from their lock file when missing)."""
    from bench.systems import NODE_PEERS, ensure_node_peers

    ensure_node_peers()
    return str(NODE_PEERS / "node_modules")


class NodeClient:
    """tests/integration/ws_node_client.js in a subprocess: lines in, events out."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, node_path: str, url: str, token: str) -> NodeClient:
        proc = await asyncio.create_subprocess_exec(
            "node",
            str(NODE_CLIENT),
            url,
            token,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            limit=1 << 24,
            env={**os.environ, "NODE_PATH": node_path},
        )
        return cls(proc)

    async def event(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
        assert line, "the Node client ended"
        event: dict[str, Any] = json.loads(line)
        assert "error" not in event, event
        return event

    async def recv(self) -> str:
        event = await self.event()
        assert "message" in event, event
        return str(event["message"])

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")

    async def close(self) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        while "close" not in (event := await self.event()):
            pass
        await self.proc.wait()
        return event


async def test_node_ws_compresses_and_decodes_what_a_plain_client_receives(
    stack: Stack, pool: asyncpg.Pool, team: Team, node_ws: str
) -> None:
    ids = await insert_jobs(pool, team, 120)
    channel = f"trajectory:{team.trajectory_id}"
    node = stack.nodes[1]
    client = await NodeClient.start(node_ws, node.ws, team.token)
    try:
        opened = (await client.event())["open"]
        assert opened["header"] == NO_TAKEOVER
        assert opened["extensions"].startswith("permessage-deflate")
        async with websockets.connect(
            node.ws, additional_headers={"Authorization": f"Bearer {team.token}"}, compression=None
        ) as plain:
            plain_bytes = 0

            async def plain_recv() -> str:
                nonlocal plain_bytes
                text = str(await plain.recv())
                plain_bytes += len(text.encode())
                return text

            client.send(subscribe(channel))
            await plain.send(subscribe(channel))
            from_node = await collect(client.recv, all_at("queued", ids))
            from_plain = await collect(plain_recv, all_at("queued", ids))
            await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids)
            from_node += await collect(client.recv, all_at("running", ids))
            from_plain += await collect(plain_recv, all_at("running", ids))
        closed = await client.close()
    finally:
        if client.proc.returncode is None:
            client.proc.kill()
            await client.proc.wait()
    assert comparable(from_node) == comparable(from_plain)
    assert closed["close"] == 1000 and closed["bytes"] < plain_bytes / 4, (closed, plain_bytes)  # handshake included


# -- raw frames


async def handshake(
    port: int, token: str, extensions: str | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, dict[str, str]]:
    """A websocket opened by hand: the response's headers (lower-cased names)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n"
    )
    if extensions is not None:
        head += f"Sec-WebSocket-Extensions: {extensions}\r\n"
    writer.write(head.encode() + b"\r\n")
    response = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    lines = response.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 101"), lines
    headers = {
        name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:] if line)
    }
    return reader, writer, headers


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, bool, bytes]:
    """One of the node's frames: (opcode, RSV1, payload)."""
    first, second = await reader.readexactly(2)
    assert first & 0x80 and not first & 0x30 and not second & 0x80, (first, second)  # final, no RSV2/3, unmasked
    length = second & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", await reader.readexactly(2))
    elif length == 127:
        (length,) = struct.unpack("!Q", await reader.readexactly(8))
    return first & 0x0F, bool(first & 0x40), await reader.readexactly(length)


def inflate_alone(payload: bytes) -> bytes:
    """RFC 7692 7.2.2 with a fresh context for each message: all a server without context takeover needs."""
    return zlib.decompressobj(-15).decompress(payload + b"\x00\x00\xff\xff")


def deflated_frame(opcode: int, data: bytes, fin: bool = True, rsv1: bool = True) -> bytes:
    """A compressed client frame by hand (masked with a zero key), with a window any server's terms allow."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -9)
    payload = (compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH))[:-4]
    frame = client_frame(opcode, payload, fin)
    return bytes((frame[0] | (0x40 if rsv1 else 0),)) + frame[1:]


async def read_messages(
    reader: asyncio.StreamReader, done: Callable[[Messages], bool]
) -> list[tuple[bool, bytes, dict[str, Any]]]:
    """The node's data frames until `done` says so: (RSV1, payload as sent, the message decoded)."""
    out: list[tuple[bool, bytes, dict[str, Any]]] = []
    async with asyncio.timeout(30):
        while not done([m for _, _, m in out]):
            opcode, rsv1, payload = await read_frame(reader)
            assert opcode == 0x1, (opcode, payload[:80])
            out.append((rsv1, payload, json.loads(inflate_alone(payload) if rsv1 else payload)))
    return out


def snapshot_done(messages: Messages) -> bool:
    return any(m["type"] == "snapshot" and m["final"] for m in messages)


async def test_the_nodes_compressed_frames_inflate_each_alone_and_are_the_same_bytes_for_everyone(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """Two compressing clients and a plain one on a channel: each live batch is one compressed frame (RSV1), byte
    for byte the same for both (deflated once), that inflates with a fresh context to the plain client's message;
    each compressing client's own snapshot pages inflate alone too. The compressing clients subscribe with a
    compressed message, the plain one with a plain one."""
    ids = await insert_jobs(pool, team, 40)
    channel = f"trajectory:{team.trajectory_id}"
    port = stack.nodes[0].port
    clients = [
        await handshake(port, team.token, OFFER),
        await handshake(port, team.token, OFFER),
        await handshake(port, team.token, None),
    ]
    assert [headers.get("sec-websocket-extensions") for _, _, headers in clients] == [NO_TAKEOVER, NO_TAKEOVER, None]
    try:
        for i, (_, writer, _) in enumerate(clients):
            writer.write(
                client_frame(0x1, subscribe(channel).encode())
                if i == 2
                else deflated_frame(0x1, subscribe(channel).encode())
            )
        snapshots = [await read_messages(reader, snapshot_done) for reader, _, _ in clients]
        assert [m for _, _, m in snapshots[0]][0]["type"] == "snapshot" and all(rsv1 for rsv1, _, _ in snapshots[0])
        assert [comparable([m for _, _, m in got]) for got in snapshots] == [
            comparable([m for _, _, m in snapshots[2]])
        ] * 3
        await pool.execute("update jobs set status = 'running' where id = any($1::bigint[])", ids)
        live = [await read_messages(reader, all_at("running", ids)) for reader, _, _ in clients]
    finally:
        for _, writer, _ in clients:
            writer.close()
    first, second, plain = live
    assert [payload for _, payload, _ in first] == [payload for _, payload, _ in second]  # the same bytes
    assert [m for _, _, m in first] == [m for _, _, m in plain]
    assert all(rsv1 for rsv1, _, _ in first) and not any(rsv1 for rsv1, _, _ in plain)
    assert sum(len(p) for _, p, _ in first) < sum(len(p) for _, p, _ in plain) / 4


async def test_wsproto_compresses_its_messages_and_the_node_answers(
    stack: Stack, pool: asyncpg.Pool, team: Team
) -> None:
    """wsproto negotiates permessage-deflate with its own code and compresses what it sends: the node inflates it,
    and wsproto inflates the node's snapshot; a message sent uncompressed on the same connection is taken too
    (RSV1 is per message)."""
    await insert_jobs(pool, team, 40)
    reader, writer = await asyncio.open_connection("127.0.0.1", stack.nodes[1].port)
    client = RawClient(reader, writer)
    writer.write(
        client.ws.send(
            Request(
                host="127.0.0.1",
                target="/ws",
                extensions=[PerMessageDeflate()],
                extra_headers=[(b"authorization", f"Bearer {team.token}".encode())],
            )
        )
    )
    events = await client.events_until(lambda e: isinstance(e, AcceptConnection))
    accepted = events[-1]
    assert isinstance(accepted, AcceptConnection) and [e.name for e in accepted.extensions] == ["permessage-deflate"]
    writer.write(client.ws.send(TextMessage(subscribe(f"trajectory:{team.trajectory_id}"))))  # compressed by wsproto
    writer.write(client_frame(0x1, json.dumps({"type": "ping", "id": 2}).encode()))  # plain, by hand
    messages: Messages = []

    def answered(event: object) -> bool:
        if isinstance(event, TextMessage):
            messages.append(json.loads(event.data))
        return {"pong", "snapshot"} <= {m["type"] for m in messages}

    await client.events_until(answered)
    pong, snapshot = (next(m for m in messages if m["type"] == kind) for kind in ("pong", "snapshot"))
    assert pong["id"] == 2 and len(snapshot["jobs"]) == 40 and not [m for m in messages if m["type"] == "error"]
    client.close()


async def test_rsv1_without_compression_negotiated_fails_the_connection_with_1002(stack: Stack, team: Team) -> None:
    client = await RawClient.connect(stack.nodes[0].port, team.token)  # offers no extension
    client.send_raw(deflated_frame(0x1, json.dumps({"type": "ping", "id": 1}).encode()))
    assert await server_close_code(client) == 1002
    client.close()


async def test_a_decompression_bomb_is_closed_with_1009(stack: Stack, team: Team) -> None:
    """A kilobyte that inflates to 10 MB: the node stops inflating past the message bound (64 KiB)."""
    reader, writer, headers = await handshake(stack.nodes[0].port, team.token, OFFER)
    assert headers["sec-websocket-extensions"] == NO_TAKEOVER
    writer.write(deflated_frame(0x1, b" " * 10_000_000))
    client = RawClient(reader, writer)
    assert await server_close_code(client) == 1009
    assert await client.at_eof()
    client.close()


# -- the node's own link and the ASGI fallback agree


@pytest.fixture(scope="module")
def asgi_node(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The same app under uvicorn's own websocket protocol: the ASGI fallback, with uvicorn's compression."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": stack.database_url,
        "REDIS_URL": stack.redis_url,
        "GATEWAY_SECRET": stack.secret,
        "GATEWAY_LOG_LEVEL": "INFO",
    }
    log = tmp_path_factory.mktemp("asgi") / "asgi-node.log"
    with open(log, "wb") as handle:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.asgi_node", str(port)],
            env=env,
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    node = Process("asgi-node", proc, log, port)
    try:
        wait_http(node)
        yield node
    finally:
        node.stop()


BAD_INPUT = [
    ("text-not-utf8", None, client_frame(0x1, b"\xff\xfe"), 1007),
    ("unmasked", None, bytes((0x81, 2)) + b"hi", 1002),
    ("rsv1-not-negotiated", None, deflated_frame(0x1, b'{"type": "ping"}'), 1002),
    ("rsv2", None, bytes((0xA1,)) + client_frame(0x1, b"x")[1:], 1002),
    ("oversize", None, client_frame(0x1, b"x" * (65 << 10)), 1009),
    ("unknown-opcode", None, client_frame(0x3, b"x"), 1002),
    ("lone-continuation", None, client_frame(0x0, b"x"), 1002),
    ("reserved-close-code", None, client_frame(0x8, struct.pack("!H", 1005)), 1002),
    ("compressed-bomb", OFFER, deflated_frame(0x1, b" " * 10_000_000), 1009),
    ("compressed-not-deflate", OFFER, bytes((0xC1,)) + client_frame(0x1, b"\xff\xff\xff\xff")[1:], 1002),
    ("compressed-rsv1-continuation", OFFER, deflated_frame(0x1, b"[1,", fin=False) + deflated_frame(0x0, b"2]"), 1002),
    ("compressed-ping", OFFER, bytes((0xC9,)) + client_frame(0x9, b"p")[1:], 1002),
    ("compressed-not-utf8", OFFER, deflated_frame(0x1, b"\xff\xfe" * 10), 1007),
]


@pytest.mark.parametrize(("name", "offer", "data", "code"), BAD_INPUT, ids=[case[0] for case in BAD_INPUT])
async def test_both_paths_close_bad_input_with_the_same_code_and_no_traceback(
    stack: Stack, asgi_node: Process, team: Team, name: str, offer: str | None, data: bytes, code: int
) -> None:
    codes = []
    for node in (stack.nodes[0], asgi_node):
        logged = len(node.output())
        reader, writer, headers = await handshake(node.port, team.token, offer)
        assert ("sec-websocket-extensions" in headers) == (offer is not None), headers
        writer.write(data)
        client = RawClient(reader, writer)
        codes.append(await server_close_code(client))
        client.close()
        await asyncio.sleep(0.1)  # what the node logs about it, it logs before its close frame: a margin
        new = node.output()[logged:]
        assert "Traceback" not in new and " ERROR " not in new, new
        assert new.count(" WARNING ") <= 1, new
    assert codes == [code, code], (
        f"{name}: the node's own link closed with {codes[0]}, the ASGI fallback with {codes[1]}"
    )
