"""Commands to clusters and their confirmations between the gateway's processes, with no pooled connection held
while a command waits. Nothing here is a cluster's: a cluster reaches its commands through the gateway (its feed,
gateway.hub.cluster_feeds) and confirms over HTTP; no credential to the bus is handed out.

A command goes out on the cluster's pub/sub channel, heard by the node that holds the cluster's feed; the
node that takes the cluster's confirmation pushes it onto the command's reply list (`Replies.key`, kept with the
command in PostgreSQL). Waiting with one BLPOP per command would hold one pooled connection per action
for up to the command timeout, so a burst of actions by one team could exhaust the pool that everyone's
subscribes use. Instead one listener per process waits on every open reply list with a single BLPOP, on a
connection of its own. All of a process's reply lists share one hash tag, so on a Redis Cluster they live in
one slot and one BLPOP can watch them all; a new reply list wakes the listener through the same tag's wake-up
list, so that its next BLPOP includes it.

`RedisCommands` is both sides of gateway.bus.broker's `Commands`: the sender's (`send`, `replies`) and the feed's
(`inbox`, the commands sent to a cluster as they arrive, and `confirm`). Every error it raises is the bus's
(gateway.bus.errors).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any, cast

from redis.asyncio import Redis

from . import keys
from .clients import open_client
from .connection import Bus
from .errors import BusError
from .translate import redis_errors, translated

log = logging.getLogger(__name__)

LISTEN_TIMEOUT = 1.0  # seconds a BLPOP waits before the listener looks whether anyone still waits
RETRY_AFTER = 0.2  # seconds before the listener connects again after an error


class Replies:
    """The confirmations to one command, as they arrive."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    async def next(self, deadline: float) -> bytes | None:
        """The next confirmation, or None once `deadline` (time.monotonic()) has passed."""
        left = deadline - time.monotonic()
        if left <= 0 and self.queue.empty():
            return None
        try:
            async with asyncio.timeout(max(0.0, left)):
                return await self.queue.get()
        except TimeoutError:
            return None


class RedisCommands:
    """A process's way to command clusters (publish a command, then read its confirmations), and to hear the
    commands of the clusters whose feeds it holds and pass their confirmations on."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.tag = f"r.{secrets.token_hex(6)}"
        self._wake = keys.replies_wake(self.tag)
        self._open: dict[str, Replies] = {}
        self._listener: asyncio.Task[None] | None = None
        self._client: Redis | None = None
        self._woken = False  # a wake-up is on its way to the listener

    @translated
    async def send(self, cluster_id: int, command: bytes) -> bool:
        """Publish a command; False when the cluster is certainly not listening (so nobody will confirm)."""
        listeners = await self.bus.redis.publish(keys.cluster_commands(cluster_id), command)
        # A cluster's PUBLISH reaches every shard but counts one shard's listeners: there, wait for all.
        return bool(listeners) or self.bus.cluster

    @contextlib.asynccontextmanager
    async def replies(self, command_id: str) -> AsyncIterator[Replies]:
        """A reply list for one command, watched by the listener while the block runs."""
        replies = Replies(keys.reply(self.tag, command_id))
        self._open[replies.key] = replies
        try:
            with redis_errors:
                await self._watch()
            yield replies
        finally:
            del self._open[replies.key]
            with contextlib.suppress(BusError), redis_errors:
                await self.bus.redis.delete(replies.key)  # confirmations that came too late

    async def _watch(self) -> None:
        """Make sure the listener runs and its next BLPOP includes every open reply list."""
        if self._listener is None or self._listener.done():
            self._listener = asyncio.create_task(self._listen(), name="cluster-confirmations")
        elif not self._woken:
            self._woken = True
            async with self.bus.redis.pipeline(transaction=False) as pipe:
                pipe.lpush(self._wake, b"")
                pipe.expire(self._wake, 60)  # a wake-up nobody took does not outlive the process by long
                await pipe.execute()

    async def _listen(self) -> None:
        while self._open:
            try:
                with redis_errors:
                    client = await self._connection()
                    self._woken = False
                    got = await client.blpop([self._wake, *self._open], timeout=LISTEN_TIMEOUT)
            except BusError as exc:
                log.warning("confirmations: %s, listening again shortly", type(exc).__name__)
                await self._drop_connection()
                await asyncio.sleep(RETRY_AFTER)
                continue
            if got is None:
                continue
            replies = self._open.get(keys.text(got[0]))
            if replies is not None:
                replies.queue.put_nowait(cast(bytes, got[1]))  # the clients here do not decode answers
        self._listener = None

    async def _connection(self) -> Redis:
        """The listener's own connection, to the server that holds this process's reply lists."""
        if self._client is None:
            shard = await self.bus.address_for(self._wake) if self.bus.cluster else None
            self._client = open_client(self.bus.url, shard=shard, single_connection=True)
        return self._client

    async def _drop_connection(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(BusError), redis_errors:
                await client.aclose()
        with contextlib.suppress(BusError), redis_errors:
            await self.bus.refresh()

    async def aclose(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
        await self._drop_connection()

    # -- a cluster's side

    @contextlib.asynccontextmanager
    async def inbox(self, cluster_id: int) -> AsyncIterator[AsyncIterator[bytes]]:
        """The commands sent to a cluster, as they arrive (encoded), for the node holding its feed; subscribed by
        the time the block starts, so a command sent from then on reaches it."""
        bus = self.bus
        if bus.cluster:
            with redis_errors:
                await bus.redis.initialize()  # the slot map, which the cluster's pubsub picks its node by
        pubsub = bus.redis.pubsub()
        try:
            with redis_errors:
                await pubsub.subscribe(keys.cluster_commands(cluster_id))
            yield _commands(pubsub)
        finally:
            with contextlib.suppress(BusError), redis_errors:
                await pubsub.aclose()

    @translated
    async def confirm(self, reply_to: str, confirmation: bytes) -> None:
        """Push a cluster's confirmation onto its command's reply list; kept a minute for a late reader."""
        await self.bus.redis.rpush(reply_to, confirmation)
        await self.bus.redis.expire(reply_to, 60)


async def _commands(pubsub: Any) -> AsyncIterator[bytes]:
    with redis_errors:
        async for message in pubsub.listen():
            if message["type"] == "message":
                yield message["data"]
