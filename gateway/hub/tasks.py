"""The node's short background tasks (a catch-up, a repair, a Redis unsubscribe): owned here, so that
stopping the node cancels and awaits every one of them."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class Tasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def all(self) -> list[asyncio.Task[None]]:
        return list(self._tasks)
