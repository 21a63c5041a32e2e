"""How the client connects, against a stand-in server that answers the handshake as a node would: a busy
node's delay is honoured, and so is a restarting node's retry hint; a refusal retrying cannot fix ends at once,
and close() cuts a wait short."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from gateway.client import ConnectionFailed, GatewayClient, State
from gateway.core.restart import restart_reason

Answer = Callable[[int], Response | None]  # the attempt's number -> a refusal, or None to accept


def refusal(status: int, body: dict[str, object]) -> Response:
    data = json.dumps(body).encode()
    headers = Headers([("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return Response(status, "Refused", headers, data)


class StandIn:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.attempts: list[float] = []  # loop time of each handshake

    def process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        self.attempts.append(asyncio.get_running_loop().time())
        return self.answer(len(self.attempts))

    @staticmethod
    async def handler(connection: ServerConnection) -> None:
        await connection.wait_closed()


@contextlib.asynccontextmanager
async def stand_in(answer: Answer) -> AsyncIterator[tuple[StandIn, str]]:
    server = StandIn(answer)
    async with serve(StandIn.handler, "127.0.0.1", 0, process_request=server.process_request) as running:
        port = next(iter(running.sockets)).getsockname()[1]
        yield server, f"http://127.0.0.1:{port}"


async def test_a_busy_node_is_asked_again_after_its_retry_after_ms() -> None:
    busy = refusal(503, {"error": "busy", "message": "too many new connections: retry shortly", "retry_after_ms": 700})
    async with stand_in(lambda n: busy if n == 1 else None) as (server, url):
        async with GatewayClient(url, "token", max_attempts=2) as client:
            assert client.state is State.OPEN
        assert server.attempts[1] - server.attempts[0] >= 0.69  # not the first backoff's 0.125-0.375 s


async def test_a_refusal_that_retrying_cannot_fix_ends_at_the_first_attempt() -> None:
    forbidden = refusal(403, {"error": "origin_not_allowed", "message": "this origin may not open the socket"})
    async with stand_in(lambda n: forbidden) as (server, url):
        with pytest.raises(ConnectionFailed) as raised:
            async with GatewayClient(url, "token"):  # no limit on attempts, yet no retry
                pass
        assert raised.value.attempts == 1 and len(server.attempts) == 1
        assert raised.value.reason == "HTTP 403 origin_not_allowed: this origin may not open the socket"


async def test_too_many_connections_is_retried_like_a_refused_connection() -> None:
    crowded = refusal(429, {"error": "too_many_connections", "message": "at most 2 connections per user"})
    async with stand_in(lambda n: crowded if n < 3 else None) as (server, url):
        client = GatewayClient(url, "token")
        async with client:
            assert client.state is State.OPEN and len(server.attempts) == 3


async def test_close_cuts_the_wait_between_attempts_short() -> None:
    busy = refusal(503, {"error": "busy", "message": "come back later", "retry_after_ms": 60_000})
    async with stand_in(lambda n: busy) as (server, url):
        client = GatewayClient(url, "token")
        opening = asyncio.create_task(client.__aenter__())
        deadline = asyncio.get_running_loop().time() + 10
        while not server.attempts:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        await client.close()  # while the client waits its minute
        await asyncio.wait_for(opening, 5)
        assert client.state is State.CLOSED and len(server.attempts) == 1
        with pytest.raises(StopAsyncIteration):
            await anext(client)


async def test_a_restarting_node_is_asked_again_after_the_retry_hint_in_its_close_reason() -> None:
    attempts: list[float] = []

    async def restarting(connection: ServerConnection) -> None:
        """A node that restarts under its first connection: 1012 with a retry hint of 700 ms in the reason."""
        attempts.append(asyncio.get_running_loop().time())
        if len(attempts) == 1:
            await connection.close(1012, restart_reason(700))
        await connection.wait_closed()

    async with serve(restarting, "127.0.0.1", 0) as running:
        port = next(iter(running.sockets)).getsockname()[1]
        client = GatewayClient(f"http://127.0.0.1:{port}", "token")
        async with client:
            reading = asyncio.create_task(anext(client))  # reads the close, reconnects, then waits for a message
            deadline = asyncio.get_running_loop().time() + 10
            while client.reconnects == 0:
                assert asyncio.get_running_loop().time() < deadline, attempts
                await asyncio.sleep(0.01)
            reading.cancel()
        assert len(attempts) == 2
        assert attempts[1] - attempts[0] >= 0.69  # the hint, not the first backoff's 0.125-0.375 s
