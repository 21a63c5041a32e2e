"""Starlette + encode/broadcaster peer: the textbook Python "websocket over Redis" app.

A Redis ``Broadcast`` is connected in the lifespan; the websocket endpoint
``/ws?channels=team:3,trajectory:17`` accepts, then, per channel, runs
``async with broadcast.subscribe("bench:" + channel)`` and forwards every event's
message verbatim with ``send_text``, next to a receive loop that notices the
disconnect -- the shape of broadcaster's own README example. Served by uvicorn.
Once subscribed, a websocket first gets the channel's current state, where the
tap keeps one (state.py): read and decoded once for every websocket that arrives
before the channel's next message (the backend counts each channel's messages).

broadcaster 0.3.1 (the latest release) does not work as shipped with redis-py 8,
so two setup-path bugs are patched below; the per-message path (one Redis
connection -> one asyncio.Queue per subscriber -> one task per websocket and
channel -> send_text) is the library's own, the backend only counting each
channel's messages as it hands them out.

With BROADCAST_URL set to a postgres:// URL (the system "broadcaster-pg"), the
same app runs on broadcaster's own Postgres backend instead: one asyncpg
connection that LISTENs to each channel, fed by NOTIFY from a row trigger on
`jobs` (bench/peers/notify_trigger.py). One setup-path bug of that backend is
patched too; its per-message path (asyncpg's notification callback -> the
backend's queue -> the same queues and tasks) is the library's own.

    python bench/peers/broadcaster_app.py --port 8105 --redis redis://127.0.0.1:6379
    BROADCAST_URL=postgresql://... python bench/peers/broadcaster_app.py --port 8106
"""

import asyncio
import os
from contextlib import asynccontextmanager

import anyio
import broadcaster
from broadcaster._backends.postgres import PostgresBackend
from broadcaster._backends.redis import RedisBackend
from broadcaster._base import Subscriber
from redis import asyncio as redis
from starlette.applications import Starlette
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket
from state import States  # a sibling module: the peers run as scripts


class FixedRedisBackend(RedisBackend):
    def __init__(self, url: str, states: States[str]) -> None:
        super().__init__(url)
        self.states = states

    # 0.3.1 wakes its listener *before* SUBSCRIBE; redis-py 8's subscribe() yields
    # before recording the channel, so the listener sees no subscription, stops,
    # and sleeps until some *other* new channel is subscribed: messages are lost.
    async def subscribe(self, channel: str) -> None:
        await self._pubsub.subscribe(channel)
        self._ready.set()

    # Not fixes: each channel's messages counted as they are handed out, for the states
    # read; a channel no longer subscribed is no longer counted.
    async def next_published(self) -> broadcaster.Event:
        event = await super().next_published()
        self.states.saw(event.channel)
        return event

    async def unsubscribe(self, channel: str) -> None:
        self.states.forget(channel)
        await super().unsubscribe(channel)


class FixedPostgresBackend(PostgresBackend):
    # 0.3.1 LISTENs on its one connection as each channel's first websocket arrives;
    # websockets arriving together make asyncpg refuse all but one ("another operation
    # is in progress") and those subscribers fail. One LISTEN or UNLISTEN at a time.
    async def connect(self) -> None:
        await super().connect()
        self._setup = asyncio.Lock()

    async def subscribe(self, channel: str) -> None:
        async with self._setup:
            await super().subscribe(channel)

    async def unsubscribe(self, channel: str) -> None:
        async with self._setup:
            await super().unsubscribe(channel)


class Broadcast(broadcaster.Broadcast):
    # 0.3.1 registers a channel's first queue only after awaiting the backend, so
    # websockets that subscribe to a new channel at the same moment overwrite each
    # other's queue and all but the last receive nothing. Register first, then await.
    @asynccontextmanager
    async def subscribe(self, channel: str):
        queue: asyncio.Queue = asyncio.Queue()
        queues = self._subscribers.setdefault(channel, set())
        queues.add(queue)
        try:
            if len(queues) == 1:
                await self._backend.subscribe(channel)
            yield Subscriber(queue)
        finally:
            queues.discard(queue)
            if not queues and self._subscribers.get(channel) is queues:
                del self._subscribers[channel]
                await self._backend.unsubscribe(channel)
            await queue.put(None)


def build_app(url: str) -> Starlette:
    # Same as Broadcast(url) (which picks the backend by the URL's scheme), with the fixed backends.
    # On PostgreSQL (fed by NOTIFY, not the tap) there is no kept state to send.
    postgres = url.startswith(("postgres://", "postgresql://"))
    client = None if postgres else redis.from_url(url)
    states = None if client is None else States(client, bytes.decode)
    broadcast = Broadcast(backend=FixedPostgresBackend(url) if states is None else FixedRedisBackend(url, states))

    @asynccontextmanager
    async def lifespan(app):
        await broadcast.connect()
        yield
        await broadcast.disconnect()
        if client is not None:
            await client.aclose()

    async def forward(websocket: WebSocket, channel: str):
        async with broadcast.subscribe(channel="bench:" + channel) as subscriber:
            state = None if states is None else await states.read("bench:" + channel)
            if state is not None:
                await websocket.send_text(state)
            async for event in subscriber:
                await websocket.send_text(event.message)

    async def endpoint(websocket: WebSocket):
        await websocket.accept()
        channels = dict.fromkeys(c for c in websocket.query_params.get("channels", "").split(",") if c)
        async with anyio.create_task_group() as tg:
            for channel in channels:
                tg.start_soon(forward, websocket, channel)
            async for _ in websocket.iter_text():
                pass  # clients send nothing we act on; this loop just waits for the disconnect
            tg.cancel_scope.cancel()

    return Starlette(routes=[WebSocketRoute("/ws", endpoint)], lifespan=lifespan)


if __name__ == "__main__":
    from serve import serve  # a sibling module: the peers run as scripts

    serve(lambda redis_url: build_app(os.environ.get("BROADCAST_URL") or redis_url), __doc__.splitlines()[0])
