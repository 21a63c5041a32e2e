"""python-socketio peer: the stock multi-node Socket.IO stack for a Python team.

``socketio.AsyncServer`` (ASGI mode) with ``AsyncRedisManager`` as client manager,
wrapped in ``socketio.ASGIApp`` and served by uvicorn. Clients connect to
``/socket.io/?EIO=4&transport=websocket``, emit ``join`` with a channel name and
enter that room. A background task does ``PSUBSCRIBE bench:*`` and re-emits each
transaction as ONE ``sio.emit("job", change, room=channel)`` PER CHANGE (each a
job's whole state), then, in a team room, one ``emit("counts", ...)`` with the
team's counts; every emit goes through the Redis manager (delivered locally and
published for the other nodes) exactly as in a multi-node deployment. A client
joining a room first gets ``sio.emit("state", ..., to=sid)`` with the channel's
current state, where the tap keeps one (state.py): read and parsed once for every
client who joins before the channel's next message, encoded for each.

    python bench/peers/socketio_py.py --port 8104 --redis redis://127.0.0.1:6379
"""

import asyncio
import json

import redis.asyncio as redis
import socketio
from state import States  # a sibling module: the peers run as scripts

PREFIX = "bench:"


def build_app(redis_url: str) -> socketio.ASGIApp:
    # The manager's own channel must not match the tap's `bench:*` pattern.
    manager = socketio.AsyncRedisManager(redis_url, channel="socketio")
    sio = socketio.AsyncServer(async_mode="asgi", client_manager=manager)
    client = redis.from_url(redis_url)
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    states = States(client, json.loads)
    tasks = []

    @sio.on("join")
    async def join(sid, channel):
        if isinstance(channel, str):
            await sio.enter_room(sid, channel)
            state = await states.read(PREFIX + channel)
            if state is not None:
                await sio.emit("state", state, to=sid)

    async def tap():
        async for msg in pubsub.listen():
            tap_channel = msg["channel"].decode()
            states.saw(tap_channel)
            channel = tap_channel[len(PREFIX) :]
            message = json.loads(msg["data"])
            for change in message["changes"]:
                change["channel"] = channel
                await sio.emit("job", change, room=channel)
            if "counts" in message:
                counts = {"channel": channel, "seq": message.get("seq", 0), "counts": message["counts"]}
                await sio.emit("counts", counts, room=channel)

    async def startup():
        # uvicorn binds only after startup: subscribed before the port opens, nothing is missed.
        # (It also keeps cancellation away from psubscribe, which redis-py 8.1 can swallow.)
        await pubsub.psubscribe(PREFIX + "*")
        tasks.append(sio.start_background_task(tap))

    async def shutdown():
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await pubsub.aclose()
        await client.aclose()

    return socketio.ASGIApp(sio, on_startup=startup, on_shutdown=shutdown)


if __name__ == "__main__":
    from serve import serve  # a sibling module: the peers run as scripts

    serve(build_app, __doc__.splitlines()[0])
