"""A simulated cluster's background work: what a callback starts and cannot await (a download, an artifact
upload, a staging finished after a restart). Owned here, so that stopping the cluster cancels and awaits it; a
failed request is one warning line, any other failure an error with its traceback."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

import httpx

from .ingest import describe_failure

log = logging.getLogger("gateway.sim.cluster")  # the cluster's own log


class Background:
    def __init__(self, cluster_id: int) -> None:
        self.cluster_id = cluster_id
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None], what: str) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(lambda task: self._done(task, what))

    def _done(self, task: asyncio.Task[None], what: str) -> None:
        self._tasks.discard(task)
        failure = None if task.cancelled() else task.exception()
        if isinstance(failure, httpx.HTTPError):
            log.warning("cluster %d: %s failed: %s", self.cluster_id, what, describe_failure(failure))
        elif failure is not None:
            log.error("cluster %d: %s failed", self.cluster_id, what, exc_info=failure)

    def all(self) -> list[asyncio.Task[None]]:
        return list(self._tasks)
