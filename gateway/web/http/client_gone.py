"""A request's work cancelled when its client leaves: a statement that runs on for nobody holds a pooled
connection and PostgreSQL's time (asyncpg cancels a statement on the server when its task is cancelled)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import ClientDisconnect, Request

T = TypeVar("T")


async def until_gone(request: Request, work: Awaitable[T]) -> T:
    """`work`'s result, or ClientDisconnect once the client has gone (`work` then cancelled). For requests
    without a body: the body's message is read here."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in (task, gone):
            waiting.cancel()  # a cancellation of this request's own task (the server stopping) reaches both
        await asyncio.gather(task, gone, return_exceptions=True)
    if task.cancelled():
        raise ClientDisconnect()
    return task.result()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
