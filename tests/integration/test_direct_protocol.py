"""The gateway's own websocket link on the node's own socket layer (gateway.web.server): a tiny opener takes
every handshake and echoes.

What a client sees must be what any websocket server gives it: messages in order, pings answered, a clean
closing handshake with our code, 1012 on shutdown; and a peer that stops reading must not grow the node's
memory without bound (frames wait in the connection's bounded outbound, then it is resynced or closed).
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
from typing import Any

import pytest
import websockets
from websockets.exceptions import ConnectionClosed
from websockets.server import ServerProtocol

from gateway.core.wsframe import Frame, ping_frame
from gateway.hub.connection import CLOSE_SLOW, Connection
from gateway.web.server.http11 import HttpProtocol
from gateway.web.server.serve import Server
from gateway.web.server.served import Served
from gateway.web.server.upgrade import Opening, Upgrade
from gateway.web.websocket.direct import DirectLink
from gateway.web.websocket.tcpstate import acknowledged, unsent


class EchoApp:
    """Accepts every handshake; echoes text messages upper-cased, "close" closes with 4321."""

    def __init__(self) -> None:
        self.conns: list[Connection] = []
        self.lost = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})

    async def open(self, opening: Opening) -> None:
        conn = Connection(1, "json", max_pending=64 << 10)
        self.conns.append(conn)

        def on_message(data: str | bytes) -> None:
            if data == "close":
                conn.close(4321)
            else:
                text = data if isinstance(data, str) else data.decode()
                conn.push(Frame(text.upper().encode(), text=True))

        def on_lost() -> None:
            self.lost += 1

        conn.link = opening.accept(on_message, on_lost, conn)
        conn.flush()


async def lost(app: EchoApp) -> int:
    """How many connections the app has seen end, once one has (or after two seconds)."""
    for _ in range(100):
        if app.lost:
            break
        await asyncio.sleep(0.02)
    return app.lost


async def serve(deflate: bool) -> Any:
    app = EchoApp()
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    served = Served(app=app, opener=app.open, ws_path="/", compression=deflate)
    srv = Server(served, signals=False, graceful_shutdown=5)
    task = asyncio.create_task(srv.serve([sock]))
    while not srv.started:
        await asyncio.sleep(0.01)
    yield app, f"ws://127.0.0.1:{port}/", srv
    srv.stop()
    await asyncio.wait_for(task, 10)


@pytest.fixture
async def server() -> Any:
    async for running in serve(deflate=False):
        yield running


@pytest.fixture
async def deflating_server() -> Any:
    async for running in serve(deflate=True):
        yield running


async def test_messages_flow_both_ways_in_order(server: Any) -> None:
    app, url, _ = server
    async with websockets.connect(url) as ws:
        for i in range(200):
            await ws.send(f"m{i}")
        got = [await asyncio.wait_for(ws.recv(), 5) for _ in range(200)]
        assert got == [f"M{i}" for i in range(200)]
        assert isinstance(app.conns[0].link, DirectLink)
        pong = await ws.ping(b"x")
        await asyncio.wait_for(pong, 5)
        big = "y" * 70_000  # a fragmented-by-size frame from the client, 64-bit length
        await ws.send(big)
        assert await asyncio.wait_for(ws.recv(), 5) == big.upper()


async def test_a_compressing_client_is_adopted_and_speaks_compressed_both_ways(deflating_server: Any) -> None:
    """Python websockets offers permessage-deflate by default: the link inflates its messages, whole or
    fragmented, and writes compressed frames (deflated once, whoever reads them)."""
    app, url, _ = deflating_server
    async with websockets.connect(url) as ws:
        assert ws.response.headers["Sec-WebSocket-Extensions"] == (
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover"
        )
        await ws.send("a" * 5000)
        assert await asyncio.wait_for(ws.recv(), 5) == "A" * 5000
        link = app.conns[0].link
        assert isinstance(link, DirectLink) and link.deflate == 15 and app.conns[0].wire_kind == 30
        await ws.send(iter(["ab" * 1000, "cd" * 1000, "ef"]))  # compressed, in three frames
        assert await asyncio.wait_for(ws.recv(), 5) == "AB" * 1000 + "CD" * 1000 + "EF"
        await ws.send("small")  # under the threshold both ways: RSV1 is per message
        assert await asyncio.wait_for(ws.recv(), 5) == "SMALL"


async def test_without_compression_configured_none_is_negotiated(server: Any) -> None:
    _, url, _ = server
    async with websockets.connect(url) as ws:
        assert "Sec-WebSocket-Extensions" not in ws.response.headers
        await ws.send("a" * 5000)
        assert await asyncio.wait_for(ws.recv(), 5) == "A" * 5000


async def test_fragmented_client_messages_are_joined(server: Any) -> None:
    _, url, _ = server
    async with websockets.connect(url) as ws:
        await ws.send(iter(["ab", "cd", "ef"]))
        assert await asyncio.wait_for(ws.recv(), 5) == "ABCDEF"


async def test_a_server_close_reaches_the_client_with_its_code(server: Any) -> None:
    app, url, _ = server
    async with websockets.connect(url) as ws:
        await ws.send("close")
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), 5)
        assert info.value.rcvd is not None and info.value.rcvd.code == 4321
    assert await lost(app) == 1


async def test_a_client_close_is_answered(server: Any) -> None:
    app, url, _ = server
    ws = await websockets.connect(url)
    await ws.close(1000, "bye")
    assert ws.close_code == 1000
    assert await lost(app) == 1


async def test_shutdown_tells_clients_to_reconnect(server: Any) -> None:
    _, url, srv = server
    async with websockets.connect(url) as ws:
        srv.stop()
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), 10)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1012


async def test_an_unmasked_client_frame_is_a_protocol_error(server: Any) -> None:
    _, url, _ = server
    port = int(url.rsplit(":", 1)[1].strip("/"))
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 101")
    # A ping, then an unmasked frame, in one write: the ping is still answered, then the socket closes.
    writer.write(b"\x89\x81\x00\x00\x00\x00p" + b"\x81\x02hi")
    pong = await asyncio.wait_for(reader.readexactly(3), 5)
    assert pong == b"\x8a\x01p"
    frame = await asyncio.wait_for(reader.readexactly(4), 5)
    assert frame[0] == 0x88 and int.from_bytes(frame[2:4], "big") == 1002
    writer.close()


async def test_text_that_is_not_utf8_is_refused_with_1007(server: Any) -> None:
    _, url, _ = server
    async with websockets.connect(url) as ws:
        await ws.send(b"\xff\xfe", text=True)  # sent as a text frame without checking
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), 5)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1007


async def raw_peer(app: EchoApp, url: str, rcvbuf: int) -> tuple[socket.socket, Connection]:
    """A websocket client on a plain socket that reads only when told to, and the app's connection for it."""
    port = int(url.rsplit(":", 1)[1].strip("/"))
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    known = len(app.conns)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    await loop.sock_sendall(
        sock,
        b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    assert (await asyncio.wait_for(loop.sock_recv(sock, 1024), 5)).startswith(b"HTTP/1.1 101")
    for _ in range(250):
        if len(app.conns) > known:
            break
        await asyncio.sleep(0.02)
    return sock, app.conns[known]


async def test_a_slow_reader_whose_backlog_waits_in_the_kernel_outlives_the_keepalive(server: Any) -> None:
    """Two peers are sent 3 MiB each, far more than the kernel's queues hold. Between two keepalive pings one
    reads a little of it (not as far as the first ping), the other nothing. The reader stays: the kernel saw it
    acknowledge bytes from a full window, though too few for the transport's buffer to move. The other is
    closed (1011)."""
    app, url, _ = server
    loop = asyncio.get_running_loop()
    peers = [await raw_peer(app, url, rcvbuf=64 << 10) for _ in range(2)]
    links = []
    for _, conn in peers:
        link = conn.link
        assert isinstance(link, DirectLink)
        link.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        link.write_wire(b"\x82\x7f" + (3 << 20).to_bytes(8, "big"))  # one binary message of 3 MiB
        for _ in range(48):
            link.write_wire(b"z" * (64 << 10))
        links.append(link)
    socks = [link.transport.get_extra_info("socket") for link in links]
    for _ in range(250):  # the kernel has taken what it can; the rest waits in the transport, paused
        if all(not link.writable and unsent(s) > 0 for link, s in zip(links, socks, strict=True)):
            break
        await asyncio.sleep(0.02)
    for n, link in enumerate(links):
        link.ping(ping_frame(b"first"), b"first")
        assert link.ping_token == b"first", n
    buffered = links[0].transport.get_write_buffer_size()
    reader, _ = peers[0]
    acked = acknowledged(socks[0])
    read = 0
    while read < 256 << 10:  # a slow reader's progress: far from the first ping, 3 MiB in
        read += len(await asyncio.wait_for(loop.sock_recv(reader, 64 << 10), 5))
    for _ in range(250):
        if acknowledged(socks[0]) > acked:  # what it read made room for more
            break
        await asyncio.sleep(0.02)
    # The transport alone shows nothing: it has not resumed, and its buffer is as full as at the first ping.
    assert links[0].drains == 0 and links[0].transport.get_write_buffer_size() >= buffered
    for link in links:
        link.ping(ping_frame(b"second"), b"second")
    assert links[0].close_code is None and links[0].ping_token == b"second"  # still followed, pinged again
    assert links[1].close_code == 1011  # read nothing: taken for gone
    for sock, _ in peers:
        sock.close()


async def test_a_peer_that_stops_reading_is_bounded_then_closed(server: Any) -> None:
    """It lags (its channel's frames held within the bound for a catch-up from history); told to resync and
    still not reading, it is closed with 4008."""
    app, url, _ = server
    sock, conn = await raw_peer(app, url, rcvbuf=4096)
    conn.channels["trajectory:1"] = 1
    frame = Frame(json.dumps({"type": "batch", "pad": "z" * 4000}).encode(), text=True)
    for seq in range(
        1, 2001
    ):  # 8 MB at a peer that reads nothing: the kernel and the transport fill, then the outbound
        conn.deliver("trajectory:1", seq, frame)
        assert conn.outbound.size <= conn.outbound.limit + len(frame)
    held = conn.held["trajectory:1"]
    assert conn.lags == 1 and held.held_bytes <= conn.outbound.limit and conn.close_code is None
    conn.resync("trajectory:1", "slow_consumer")  # the history would not have reached back
    conn.deliver("trajectory:1", 2001, frame)
    assert conn.close_code == CLOSE_SLOW
    sock.close()


async def test_handed_over_connections_leave_nothing_for_the_cyclic_collector() -> None:
    """Once a connection is handed over, its handshake's parts (the node's HTTP protocol, its upgrade, websockets'
    handshake answerer) are freed by reference counting. Left in their cycles they were 80-odd objects a
    connection for the cyclic collector, whose passes over a reconnect storm's worth stopped the event loop for
    hundreds of milliseconds."""
    async for app, url, _ in serve(deflate=False):
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage, to be counted
        try:
            for i in range(20):
                async with websockets.connect(url) as ws:
                    await ws.send(f"m{i}")
                    assert await asyncio.wait_for(ws.recv(), 5) == f"M{i}"
            for _ in range(250):  # the server sees the closes
                if app.lost == 20:
                    break
                await asyncio.sleep(0.02)
            assert app.lost == 20
            gc.collect()
            kinds = (HttpProtocol, Upgrade, Opening, ServerProtocol)
            left = [type(o).__name__ for o in gc.garbage if isinstance(o, kinds)]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        assert left == []
