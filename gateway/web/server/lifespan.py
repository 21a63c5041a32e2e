"""The ASGI app's startup and shutdown (the ASGI lifespan protocol): the node serves only once its app has
started, and the app shuts down once the last connection is gone."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger("gateway")


class StartupFailed(Exception):
    pass


class Lifespan:
    def __init__(self, app: Any, state: dict[str, Any]) -> None:
        self.app = app
        self.state = state  # what the app keeps for every request (Starlette's lifespan state)
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self.failure: str | None = None
        self.task: asyncio.Task[None] | None = None

    async def startup(self) -> None:
        """Run the app's startup; raises StartupFailed with the app's own message when it fails."""
        self.task = asyncio.get_running_loop().create_task(self._run())
        await self.inbox.put({"type": "lifespan.startup"})
        await self.started.wait()
        if self.failure is not None:
            raise StartupFailed(self.failure)

    async def shutdown(self) -> None:
        if self.task is None or self.task.done():
            return
        await self.inbox.put({"type": "lifespan.shutdown"})
        await self.stopped.wait()
        if self.failure is not None:
            log.error("the app's shutdown failed: %s", self.failure)

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        try:
            await self.app(scope, self.inbox.get, self._send)
        except BaseException as exc:
            self.failure = self.failure or f"{type(exc).__name__}: {exc}"
            if not self.started.is_set():
                log.exception("the app failed to start")
            if not isinstance(exc, Exception):
                raise
        finally:
            if not self.started.is_set() and self.failure is None:
                self.failure = "the app ended its lifespan before starting"
            self.started.set()
            self.stopped.set()

    async def _send(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind.endswith(".failed"):
            self.failure = message.get("message", "") or kind
        if kind.startswith("lifespan.startup."):
            self.started.set()
        elif kind.startswith("lifespan.shutdown."):
            self.stopped.set()
