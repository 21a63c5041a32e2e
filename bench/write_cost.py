"""What one websocket write costs the sender on this machine, by message size: the node's floor in `steady`.

    python -m bench.write_cost [--connections 1000] [--sizes 300,1500,2400,300] [--rounds 200]

uvloop writes one message to each of C loopback TCP sockets (TCP_NODELAY, as uvicorn sets it), then sleeps
50 ms so another process (a plain selector loop, as a subscriber fleet would) reads them all and waits again;
reported: the writer's CPU (process time) per write, for each size in turn. On loopback the receive path runs
in the sender's context, and the reader is woken from its wait by the first write of each round, so this is
what a fan-out pays a write, not what it pays a byte.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import selectors
import socket
import time

import uvloop


def _read_all(port: int, connections: int, ready: multiprocessing.synchronize.Event) -> None:
    sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    selector = selectors.DefaultSelector()
    for sock in sockets:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    ready.set()
    while True:
        for key, _ in selector.select():
            try:
                if not key.fileobj.recv(1 << 20):  # type: ignore[union-attr]
                    return
            except BlockingIOError:
                pass


async def measure(connections: int, sizes: list[int], rounds: int) -> list[tuple[int, float]]:
    transports: list[asyncio.Transport] = []
    all_in = asyncio.Event()

    class Accepted(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            transports.append(transport)  # type: ignore[arg-type]
            if len(transports) == connections:
                all_in.set()

    server = await asyncio.get_running_loop().create_server(Accepted, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    ready = multiprocessing.get_context("spawn").Event()
    reader = multiprocessing.get_context("spawn").Process(target=_read_all, args=(port, connections, ready))
    reader.start()
    out: list[tuple[int, float]] = []
    try:
        await asyncio.wait_for(all_in.wait(), 60)
        for size in sizes:
            payload = b"x" * size
            for _ in range(20):  # warm up: buffers and the reader's pages
                for t in transports:
                    t.write(payload)
                await asyncio.sleep(0.01)
            started = time.process_time()
            for _ in range(rounds):
                for t in transports:
                    t.write(payload)
                await asyncio.sleep(0.05)
            out.append((size, (time.process_time() - started) * 1e6 / (rounds * connections)))
    finally:
        for t in transports:
            t.close()
        server.close()
        await asyncio.to_thread(reader.join, 10)  # the loop closes the sockets meanwhile: the reader sees EOF
        if reader.is_alive():
            reader.terminate()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--sizes", default="300,1500,2400,300", help="message sizes in bytes, measured in turn")
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    for size, us in uvloop.run(measure(args.connections, sizes, args.rounds)):
        print(f"{size:>7,} B: {us:.2f} µs of the writer's CPU a write")


if __name__ == "__main__":
    main()
