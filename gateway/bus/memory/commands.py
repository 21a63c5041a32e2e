"""Commands to clusters on the memory bus (gateway.bus.commands): a command reaches the clusters listening at
that moment; a confirmation goes to the reply list the command named, straight to whoever waits on it (what the
Redis listener's BLPOP does), else kept a minute for a late reader."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator

from .. import keys
from ..commands import Replies
from .keyspace import Keyspace

REPLY_TTL = 60.0  # a confirmation nobody took is kept this long for a late reader (as on Redis)


class MemoryCommands:
    """Both sides at once: the gateway's (`send`, `replies`) and the clusters' (`inbox`, `confirm`)."""

    def __init__(self, space: Keyspace) -> None:
        self.space = space
        self.tag = f"r.{secrets.token_hex(6)}"
        self._inboxes: dict[int, set[asyncio.Queue[bytes]]] = {}  # per cluster, a queue per listener
        self._open: dict[str, Replies] = {}  # the reply lists someone waits on

    # the gateway's side

    async def send(self, cluster_id: int, command: bytes) -> bool:
        self.space.reachable()
        listening = self._inboxes.get(cluster_id, set())
        for inbox in listening:
            inbox.put_nowait(command)
        return bool(listening)

    @contextlib.asynccontextmanager
    async def replies(self, command_id: str) -> AsyncIterator[Replies]:
        replies = Replies(keys.reply(self.tag, command_id))
        self._open[replies.key] = replies
        try:
            for confirmation in self.space.take_replies(replies.key):
                replies.queue.put_nowait(confirmation)
            yield replies
        finally:
            del self._open[replies.key]
            self.space.take_replies(replies.key)  # confirmations that came too late

    async def aclose(self) -> None:
        self._open.clear()

    # the cluster's side

    @contextlib.asynccontextmanager
    async def inbox(self, cluster_id: int) -> AsyncIterator[AsyncIterator[bytes]]:
        self.space.reachable()
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._inboxes.setdefault(cluster_id, set()).add(queue)
        try:
            yield _arriving(queue)
        finally:
            self._inboxes[cluster_id].discard(queue)

    async def confirm(self, reply_to: str, confirmation: bytes) -> None:
        self.space.writable()
        waiting = self._open.get(reply_to)
        if waiting is not None:
            waiting.queue.put_nowait(confirmation)
        else:
            self.space.keep_reply(reply_to, confirmation, REPLY_TTL)


async def _arriving(queue: asyncio.Queue[bytes]) -> AsyncIterator[bytes]:
    while True:
        yield await queue.get()
