"""An attacker with a valid token, run as its own process (`python -m tests.integration.flood_attacker`) so that
the test's own measurements of the node (its /healthz) do not wait behind the attack's sending.

Each of `--sockets` sockets opens /ws, sends its frames of `--kind` as fast as the node takes them until the
node ends the connection, then connects again, for `--seconds`. It prints one JSON line: how many frames went
out, and the close codes the node sent (None: the connection ended without a close frame we could read).

Kinds, the floods of cheap frames: `pong` (empty unsolicited pongs), `continuation` (a text frame that never ends,
then empty continuations), `ping` (websocket pings), `message` (tiny application pings).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import struct
import time


def frame(opcode: int, payload: bytes = b"", fin: bool = True) -> bytes:
    """A masked client frame with a zero key (the payload stays as written)."""
    assert len(payload) < 126
    return bytes(((0x80 if fin else 0) | opcode, 0x80 | len(payload))) + b"\0\0\0\0" + payload


CHUNK = 64 << 10
FLOODS = {
    "pong": (b"", frame(0xA)),
    "ping": (b"", frame(0x9, b"p")),
    "continuation": (frame(0x1, b"{", fin=False), frame(0x0, fin=False)),
    "message": (b"", frame(0x1, b'{"type":"ping"}')),
}


def upgrade(port: int, token: str) -> bytes:
    return (
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    ).encode()


def close_code(data: bytes) -> int | None:
    """The code of the first close frame among the node's (short, unmasked) frames."""
    pos = 0
    while len(data) - pos >= 2:
        opcode, length = data[pos] & 0x0F, data[pos + 1] & 0x7F
        at = pos + 2
        if length == 126:
            (length,) = struct.unpack_from("!H", data, at)
            at += 2
        elif length == 127:
            return None
        if opcode == 0x8 and length >= 2 and len(data) >= at + 2:
            return int.from_bytes(data[at : at + 2], "big")
        pos = at + length
    return None


async def one_connection(port: int, token: str, kind: str, stats: dict, end: float) -> None:
    opening, repeated = FLOODS[kind]
    chunk = opening + repeated * ((CHUNK - len(opening)) // len(repeated))
    count = chunk.count(repeated)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(upgrade(port, token))
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        stats["refused"][head.split(b"\r\n", 1)[0].decode()] += 1
        writer.close()
        await asyncio.sleep(0.05)
        return
    received = bytearray()

    async def read() -> None:
        while data := await reader.read(65536):
            received.extend(data)

    reading = asyncio.create_task(read())
    try:
        while not reading.done() and close_code(bytes(received[-256:])) is None:
            if time.monotonic() > end:
                stats["cut"] += 1  # still open when the attack's time was up
                writer.close()
                reading.cancel()
                return
            writer.write(chunk)
            await writer.drain()
            stats["frames_written"] += count
            chunk = repeated * (CHUNK // len(repeated))
            count = CHUNK // len(repeated)
    except (ConnectionError, OSError):
        pass
    try:
        await asyncio.wait_for(reading, 5)
    except (TimeoutError, ConnectionError, OSError):
        reading.cancel()
    writer.close()
    stats["codes"][str(close_code(bytes(received)))] += 1


async def attack(port: int, token: str, kind: str, sockets: int, seconds: float) -> dict:
    stats: dict = {"frames_written": 0, "cut": 0, "codes": collections.Counter(), "refused": collections.Counter()}
    end = time.monotonic() + seconds

    async def attacker() -> None:
        while time.monotonic() < end:
            try:
                await one_connection(port, token, kind, stats, end)
            except (ConnectionError, OSError, asyncio.IncompleteReadError):
                stats["codes"]["reset"] += 1

    await asyncio.gather(*(attacker() for _ in range(sockets)))
    return stats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--kind", choices=sorted(FLOODS), required=True)
    parser.add_argument("--sockets", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    stats = asyncio.run(attack(args.port, args.token, args.kind, args.sockets, args.seconds))
    print(json.dumps(stats), flush=True)


if __name__ == "__main__":
    main()
