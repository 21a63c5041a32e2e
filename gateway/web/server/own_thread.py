"""A server on a thread and an event loop of its own: what the health port answers there never queues behind the
node's own loop (a reconnect storm keeps that one busy for hundreds of milliseconds at a time).

The thread takes the interpreter's lock within its switch interval (5 ms) whenever it has something to answer,
and gives it back while it waits on its sockets. What it cannot answer alone it hands to the node's loop
(`OnLoop`): that part waits as long as the node does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

from .http11 import HttpProtocol
from .limits import Waiting
from .served import Served

STARTS_WITHIN = 10.0  # seconds the thread has to listen


class OnLoop:
    """An ASGI app run on another event loop (the node's): each request is run there, what it receives and sends
    brought back to the loop its connection is served on."""

    def __init__(self, app: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.app = app
        self.loop = loop

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        here = asyncio.get_running_loop()

        async def receive_here() -> Any:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(receive(), here))

        async def send_here(message: Any) -> None:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(send(message), here))

        # Cancelled here (the server stops), the request is cancelled there too.
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.app(scope, receive_here, send_here), self.loop))


def served_apart(served: Served, app: Any, loop: asyncio.AbstractEventLoop) -> Served:
    """What the thread's connections share: `served`'s bounds and headers, `app` in its place, no websockets, and
    counts of their own; a client gone there is counted on `loop`, with the rest."""
    gone = served.client_gone

    def gone_there() -> None:
        if gone is not None:
            loop.call_soon_threadsafe(gone)

    return dataclasses.replace(
        served,
        app=app,
        opener=None,
        gate=None,
        waiting=Waiting(),
        health_open=Waiting(),
        connections=set(),
        links=set(),
        tasks=set(),
        client_gone=None if gone is None else gone_there,
    )


class ThreadServer:
    """Serves `served` on sockets from a thread of its own until `stop()`."""

    def __init__(self, served: Served, name: str = "health-port") -> None:
        self.served = served
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._listening = threading.Event()
        self._thread: threading.Thread | None = None
        self._grace = 0.0
        self.failed: BaseException | None = None

    def start(self, sockets: list[Any], backlog: int) -> None:
        """Listen on `sockets` from the thread; returns once it does (raises what stopped it from listening)."""
        self._thread = threading.Thread(target=self._run, args=(sockets, backlog), name=self.name, daemon=True)
        self._thread.start()
        if not self._listening.wait(STARTS_WITHIN) or self.failed is not None:
            raise RuntimeError(f"the {self.name} thread did not start listening") from self.failed

    def _run(self, sockets: list[Any], backlog: int) -> None:
        import uvloop

        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(self._serve(sockets, backlog))
        except BaseException as exc:  # said by `start`, or lost with the thread once it served
            self.failed = exc
            self._listening.set()

    async def _serve(self, sockets: list[Any], backlog: int) -> None:
        loop = self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        servers = [
            await loop.create_server(lambda: HttpProtocol(self.served), sock=sock, backlog=backlog) for sock in sockets
        ]
        self._listening.set()
        await self._stop.wait()
        self.served.stopping = True
        for server in servers:
            server.close()
        await self.served.wind_down(self._grace)

    async def stop(self, grace: float) -> None:
        """Stop listening; what is being answered gets `grace` seconds; then the thread ends."""
        if self.loop is None or self._stop is None or self._thread is None:
            return
        self._grace = grace
        try:
            self.loop.call_soon_threadsafe(self._stop.set)
        except RuntimeError:  # its loop has ended already
            pass
        await asyncio.to_thread(self._thread.join, grace + 5.0)
