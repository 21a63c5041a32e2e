"""Floor peer: the cheapest websocket fan-out Python can do.

A raw ``asyncio.Protocol`` server on uvloop that performs the RFC 6455 upgrade
itself and, for every message on the Redis tap (``PSUBSCRIBE bench:*``), builds
ONE text frame and ``transport.write``s it to every subscriber of that channel.
No per-connection coroutine, no framework, no per-subscriber re-encoding: what
any real server costs above this is the price of its abstractions.

Clients: ``GET /ws?channels=team:3,trajectory:17``; each received text frame is
one Redis payload, verbatim. First, per channel, the channel's current state
where the tap keeps one (state.py): read and framed once for every subscriber
who arrives before the channel's next message.

    python bench/peers/floor.py --port 8101 --redis redis://127.0.0.1:6379
"""

import argparse
import asyncio
import base64
import hashlib
import resource
import signal
import struct
from urllib.parse import parse_qs, urlsplit

import redis.asyncio as redis
import uvloop
from state import States  # a sibling module: the peers run as scripts

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_FRAME = 1 << 20  # clients only send control frames; refuse to buffer floods
BAD_REQUEST = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"

# Keyed by the full Redis channel (bytes) so the hot path never decodes anything.
subscribers: dict[bytes, set[asyncio.Transport]] = {}
states: States[bytes]  # each channel's state, framed (set in main)


def frame(opcode: int, payload: bytes) -> bytes:
    n = len(payload)
    if n < 126:
        return bytes((0x80 | opcode, n)) + payload
    if n < 1 << 16:
        return struct.pack("!BBH", 0x80 | opcode, 126, n) + payload
    return struct.pack("!BBQ", 0x80 | opcode, 127, n) + payload


class WebSocket(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.buf = bytearray()
        self.channels: list[bytes] = []
        self.upgraded = False

    def connection_lost(self, exc):
        for ch in self.channels:
            subs = subscribers.get(ch)
            if subs is not None:
                subs.discard(self.transport)
                if not subs:
                    del subscribers[ch]

    def data_received(self, data):
        self.buf += data
        if not self.upgraded:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 16384:
                    self.transport.close()
                return
            head = bytes(self.buf[:end]).decode("latin-1")
            del self.buf[: end + 4]
            if not self.handshake(head):
                self.transport.write(BAD_REQUEST)
                self.transport.close()
                return
        self.read_frames()

    def handshake(self, head: str) -> bool:
        request, *lines = head.split("\r\n")
        try:
            method, target, _ = request.split(" ", 2)
        except ValueError:
            return False
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        key = headers.get("sec-websocket-key")
        url = urlsplit(target)
        if method != "GET" or url.path != "/ws" or not key or headers.get("upgrade", "").lower() != "websocket":
            return False
        accept = base64.b64encode(hashlib.sha1(key.encode() + GUID).digest())
        self.transport.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n"
        )
        self.upgraded = True
        names = parse_qs(url.query).get("channels", [""])[0].split(",")
        self.channels = [b"bench:" + n.encode() for n in dict.fromkeys(names) if n]
        for ch in self.channels:
            subscribers.setdefault(ch, set()).add(self.transport)
            states.read(ch).add_done_callback(self.send_state)
        return True

    def send_state(self, state: asyncio.Future) -> None:
        data = state.result()
        if data is not None and not self.transport.is_closing():
            self.transport.write(data)

    def read_frames(self):
        buf = self.buf
        while len(buf) >= 2:
            opcode, masked, n, pos = buf[0] & 0x0F, buf[1] & 0x80, buf[1] & 0x7F, 2
            if n == 126:
                if len(buf) < 4:
                    return
                n, pos = int.from_bytes(buf[2:4], "big"), 4
            elif n == 127:
                if len(buf) < 10:
                    return
                n, pos = int.from_bytes(buf[2:10], "big"), 10
            if n > MAX_FRAME:
                self.transport.write(frame(0x8, (1009).to_bytes(2, "big")))
                self.transport.close()
                return
            mask = buf[pos : pos + 4] if masked else b"\0\0\0\0"
            pos += 4 if masked else 0
            if len(buf) < pos + n:
                return
            payload = buf[pos : pos + n]
            del buf[: pos + n]
            if opcode < 0x8:
                continue  # text/binary/continuation: nothing to do with them
            # Control frames are <= 125 bytes, so a plain byte loop is fine to unmask.
            payload = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
            if opcode == 0x9:
                self.transport.write(frame(0xA, payload))
            elif opcode == 0x8:
                self.transport.write(frame(0x8, payload[:2]))
                self.transport.close()
                return


async def fan_out(pubsub):
    async for msg in pubsub.listen():
        states.saw(msg["channel"])
        targets = subscribers.get(msg["channel"])
        if targets:
            data = frame(0x1, msg["data"])
            for transport in targets:
                transport.write(data)


async def main(port: int, redis_url: str):
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    server = await loop.create_server(WebSocket, "127.0.0.1", port, backlog=4096, start_serving=False)
    global states
    client = redis.from_url(redis_url)
    states = States(client, lambda state: frame(0x1, state))
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    # Subscribe before accepting anyone: once the port is open, nothing published is missed.
    # (It also keeps cancellation away from psubscribe, which redis-py 8.1 can swallow.)
    await pubsub.psubscribe("bench:*")
    await server.start_serving()
    print(f"floor listening on 127.0.0.1:{port}", flush=True)
    feed = asyncio.create_task(fan_out(pubsub))
    stopped = asyncio.create_task(stop.wait())
    await asyncio.wait([feed, stopped], return_when=asyncio.FIRST_COMPLETED)
    server.close()
    going_away = frame(0x8, (1001).to_bytes(2, "big"))
    for transport in {t for subs in subscribers.values() for t in subs}:
        transport.write(going_away)
        transport.close()
    feed.cancel()
    stopped.cancel()
    await asyncio.gather(feed, stopped, return_exceptions=True)
    await pubsub.aclose()
    await client.aclose()
    if not feed.cancelled():
        feed.result()  # the Redis tap died: exit with its error, not as a clean stop


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    args = parser.parse_args()
    # Tens of thousands of sockets: the soft open-files limit up to the hard one (started alone, not by the harness).
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    uvloop.run(main(args.port, args.redis))
