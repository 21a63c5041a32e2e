"""harness/faults.py: a real TCP echo through the fault proxy. Latency delays every chunk and keeps their order,
a throttle bounds the rate, a stall holds bytes without closing anything, and healing forwards what was held."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from harness.faults import FaultProxy


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[FaultProxy]:
    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    proxy = FaultProxy("127.0.0.1", server.sockets[0].getsockname()[1], seed=37)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
        server.close()
        await server.wait_closed()


async def through(proxy: FaultProxy) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", proxy.port)


async def test_latency_delays_every_chunk_each_way_and_keeps_their_order(proxy: FaultProxy) -> None:
    reader, writer = await through(proxy)
    proxy.latency(0.2, jitter=0.05)
    sent = b""
    round_trips = []
    for i in range(10):
        line = f"message {i}\n".encode()
        sent += line
        started = time.monotonic()
        writer.write(line)
        assert await asyncio.wait_for(reader.readline(), 30) == line
        round_trips.append(time.monotonic() - started)
    assert min(round_trips) >= 2 * 0.15  # 200 ms less at most 50 ms of jitter, each way
    # A burst of chunks, each with its own jitter, still arrives in the order sent.
    burst = b"".join(f"{i:05d}".encode() for i in range(2000))
    for at in range(0, len(burst), 500):
        writer.write(burst[at : at + 500])
        await writer.drain()
        await asyncio.sleep(0)
    assert await asyncio.wait_for(reader.readexactly(len(burst)), 30) == burst
    writer.close()


async def test_a_throttled_link_carries_no_more_than_its_rate(proxy: FaultProxy) -> None:
    reader, writer = await through(proxy)
    proxy.throttle(32 << 10)
    payload = bytes(range(256)) * 256  # 64 KiB: two seconds at 32 KiB/s
    started = time.monotonic()
    writer.write(payload)
    assert await asyncio.wait_for(reader.readexactly(len(payload)), 60) == payload
    assert time.monotonic() - started >= 0.9 * len(payload) / (32 << 10)
    proxy.heal()
    started = time.monotonic()
    writer.write(payload)
    assert await asyncio.wait_for(reader.readexactly(len(payload)), 60) == payload
    assert time.monotonic() - started < 1.0  # healed: no longer throttled
    writer.close()


async def test_a_stall_holds_bytes_without_closing_and_healing_forwards_them_in_order(proxy: FaultProxy) -> None:
    reader, writer = await through(proxy)
    writer.write(b"before\n")
    assert await asyncio.wait_for(reader.readline(), 30) == b"before\n"
    proxy.stall()
    writer.write(b"during 1\n")
    writer.write(b"during 2\n")
    await writer.drain()  # the proxy's side takes the bytes (its kernel does), as a dead link's sender sees
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.readline(), 1.0)  # nothing comes back for as long as it stalls...
    assert not reader.at_eof() and not writer.is_closing()  # ...and nothing is closed, no FIN, no RST
    proxy.heal()
    assert await asyncio.wait_for(reader.readexactly(18), 30) == b"during 1\nduring 2\n"
    writer.write(b"after\n")
    assert await asyncio.wait_for(reader.readline(), 30) == b"after\n"
    writer.close()
