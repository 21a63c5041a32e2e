"""`python -m bench.keepalive_readers`: which slow readers a keepalive interval keeps, and how often the node's
kernel sees them read.

A node's own socket layer (in process, on loopback) streams a channel far faster than one client reads it, and
pings it every `--keepalive` seconds as the node does. Its ping waits behind what the client has not read, so
the node keeps it only on the kernel's evidence of reading (gateway.web.websocket.tcpstate): bytes acknowledged
while bytes wait for its full window. That evidence comes in steps: a client library takes what its socket
holds at once and hands it out slowly (Python `websockets` reads its socket again only when its queue runs
low), and a closed window reopens only once the client's kernel has freed enough, which the node's kernel finds
at its next zero-window probe (their spacing doubles while the window stays shut). Printed: the seconds between
two steps, and whether the keepalive closed the client (1011) while it read.

    python -m bench.keepalive_readers --keepalive 5 --message-bytes 1000 --per-second 20
    python -m bench.keepalive_readers --keepalive 5 --raw-bytes-per-second 20000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import socket
import time
from typing import Any

import websockets

from gateway.core.wsframe import Frame, ping_frame
from gateway.hub.connection import Connection
from gateway.web.server.serve import Server
from gateway.web.server.served import Served
from gateway.web.server.upgrade import Opening
from gateway.web.websocket.direct import DirectLink
from gateway.web.websocket.tcpstate import acknowledged, unsent

RECEIVE_BUFFER = 128 << 10  # the client's SO_RCVBUF, as the faults run's slow client (bench/faults/lab.py)


class Streamer:
    """Takes one websocket and streams a channel to it; `lifespan` as any ASGI app."""

    def __init__(self) -> None:
        self.conn: Connection | None = None
        self.link: DirectLink | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})

    async def open(self, opening: Opening) -> None:
        conn = Connection(1, "json", max_pending=1 << 20)
        self.link = conn.link = opening.accept(lambda data: None, lambda: None, conn)
        conn.channels["trajectory:1"] = 1
        self.conn = conn


async def client(port: int, args: argparse.Namespace, read: list[int]) -> None:
    """Reads slowly until cancelled: a `websockets` client taking a message every 1/per-second s, or a plain
    socket taking `raw_bytes_per_second` bytes once a second."""
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
    sock.setblocking(False)
    await loop.sock_connect(sock, ("127.0.0.1", port))
    if args.raw_bytes_per_second:
        await loop.sock_sendall(
            sock,
            b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        )
        while True:  # below any library: the answer, then the frames, as raw bytes
            read[0] += len(await loop.sock_recv(sock, args.raw_bytes_per_second))
            await asyncio.sleep(1)
    url = f"ws://127.0.0.1:{port}/"
    async with websockets.connect(url, sock=sock, ping_interval=None, compression=None, max_size=2**22) as ws:
        async for _ in ws:
            read[0] += 1
            await asyncio.sleep(1 / args.per_second)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    app = Streamer()
    listener = socket.create_server(("127.0.0.1", 0))
    server = Server(Served(app=app, opener=app.open, ws_path="/", compression=False), signals=False)
    serving = asyncio.create_task(server.serve([listener]))
    while not server.started:
        await asyncio.sleep(0.01)
    read = [0]
    reading = asyncio.create_task(client(listener.getsockname()[1], args, read))
    while app.conn is None or app.link is None:
        await asyncio.sleep(0.01)
    conn, link = app.conn, app.link
    sock = link.transport.get_extra_info("socket")
    frame = Frame(json.dumps({"type": "batch", "pad": "z" * args.message_bytes}).encode(), text=True)
    started = last_step = next_ping = time.monotonic()
    acked, steps, seq = acknowledged(sock), [], 0
    while time.monotonic() - started < args.seconds and conn.close_code is None and link.close_code is None:
        for _ in range(args.sent_per_tick):
            seq += 1
            conn.deliver("trajectory:1", seq, frame)
        await asyncio.sleep(0.05)
        now = time.monotonic()
        if acknowledged(sock) != acked and unsent(sock):  # a step of evidence: it read, its window was full
            steps.append(round(now - last_step, 1))
            last_step = now
        acked = acknowledged(sock)
        if now >= next_ping + args.keepalive:
            next_ping = now
            token = secrets.token_bytes(8)
            link.ping(ping_frame(token), token)
    ended, closed = time.monotonic(), link.close_code  # before the shutdown closes it (1012)
    reading.cancel()
    await asyncio.gather(reading, return_exceptions=True)
    server.stop()
    await asyncio.wait_for(serving, 10)
    return {
        "closed": closed,
        "after_s": round(ended - started, 1),
        "client_read": read[0],
        # The seconds between two steps of evidence once the window is full (the warm-up's are shorter than
        # 0.5 s), and since the last one at the end.
        "seconds_between_steps": [s for s in steps if s >= 0.5],
        "seconds_since_last_step": round(ended - last_step, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keepalive", type=float, default=5.0, help="seconds between pings (GATEWAY_KEEPALIVE)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the client reads")
    parser.add_argument("--message-bytes", type=int, default=1000, help="each message's padding")
    parser.add_argument("--per-second", type=float, default=20.0, help="messages the websockets client reads a second")
    parser.add_argument("--raw-bytes-per-second", type=int, default=0, help="read the socket by hand instead")
    parser.add_argument("--sent-per-tick", type=int, default=20, help="messages sent every 50 ms")
    args = parser.parse_args()
    print(json.dumps({**vars(args), **asyncio.run(run(args))}))


if __name__ == "__main__":
    main()
