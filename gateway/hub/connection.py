"""One websocket connection as the hub sees it: its subscriptions and its bounded pending output.

Frames are references to bytes shared by every subscriber of a channel; one writer task per connection
drains them. (A protocol object writing pre-built frames to the transport would do without that task.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ..core.outbound import Outbound, Verdict
from ..core.protocol import Format, Resync, ServerMessage, encode

log = logging.getLogger(__name__)

CLOSE_EXPIRED = 4001  # the session's token expired: renew it and connect again
CLOSE_SLOW = 4008  # could not drain its output even after a resync
CLOSE_FLOOD = 4029  # kept sending far past the message rate limit
CLOSE_REASONS = {
    CLOSE_EXPIRED: "token expired",
    CLOSE_SLOW: "slow consumer: could not drain",
    CLOSE_FLOOD: "too many messages",
}

SendFrame = Callable[[bytes | str], Awaitable[None]]


class Connection:
    def __init__(self, user_id: int, fmt: Format, send: SendFrame, max_pending: int) -> None:
        self.user_id = user_id
        self.format = fmt
        self.channels: set[str] = set()
        self.teams_present: set[int] = set()  # teams whose channel this connection follows (presence)
        self.channel_teams: dict[str, int] = {}  # the team each subscribed channel belongs to
        # Channels waiting for their snapshot: frames arriving meanwhile wait here, with their seq.
        self.buffering: dict[str, list[tuple[int, bytes | str]]] = {}
        self.outbound = Outbound(max_pending)
        self.closed = asyncio.Event()
        self.close_code: int | None = None
        self.on_resync: Callable[[Connection, list[str]], None] | None = None
        self._send = send
        self._wake = asyncio.Event()
        self._drain = asyncio.Event()
        self.frames_sent = 0
        self.bytes_sent = 0

    def close(self, code: int) -> None:
        """End the connection with a documented code (the adapter sends the close frame)."""
        if self.close_code is None:
            self.close_code = code
            self.closed.set()

    def deliver(self, channel: str, seq: int, frame: bytes | str) -> None:
        """Queue a shared frame of a channel (called by the hub, never awaits)."""
        waiting = self.buffering.get(channel)
        if waiting is not None:
            waiting.append((seq, frame))
            return
        self.push(frame)

    def push(self, frame: bytes | str, force: bool = False) -> None:
        if self.close_code is not None:
            return
        verdict = self.outbound.push(frame, force)
        if verdict is Verdict.RESYNC:
            dropped = sorted(self.channels)
            log.info("slow consumer user=%s: dropped its pending output, resync %d channel(s)", self.user_id, len(dropped))
            for channel in dropped:
                self.resync(channel, "slow_consumer")
            if self.on_resync is not None:
                self.on_resync(self, dropped)
        elif verdict is Verdict.CLOSE:
            log.info("slow consumer user=%s: still cannot drain, closing", self.user_id)
            self.close(CLOSE_SLOW)
        self._wake.set()

    def send_message(self, message: ServerMessage) -> None:
        """A message for this connection alone (snapshots, errors, pongs): encoded for its format."""
        data = encode(message, self.format)
        self.push(data.decode() if self.format == "json" else data, force=True)

    def resync(self, channel: str, reason: str) -> None:
        """Tell the client to reload a channel; it is unsubscribed here until it subscribes again."""
        self.channels.discard(channel)
        self.channel_teams.pop(channel, None)
        self.buffering.pop(channel, None)
        self.send_message(Resync(channel=channel, reason=reason))

    async def drained(self, below: int) -> None:
        """Wait until pending output is under `below` bytes (paged snapshots wait here between pages)."""
        while self.outbound.size > below and self.close_code is None:
            self._drain.clear()
            await self._drain.wait()

    async def release(self, channel: str, seq: int) -> None:
        """After a snapshot or replay at `seq`: send what arrived meanwhile and is newer, then go live.

        Like snapshot pages, these frames wait for the connection to drain instead of counting against
        the slow-consumer bound; frames keep arriving into the buffer until it is empty, so order holds.
        """
        waiting = self.buffering.get(channel)
        released = 0
        while waiting is not None and released < len(waiting):
            frame_seq, frame = waiting[released]
            released += 1
            if frame_seq > seq:
                self.push(frame, force=True)
            if self.outbound.size > self.outbound.limit // 2:
                await self.drained(below=self.outbound.limit // 4)
                waiting = self.buffering.get(channel)  # None: unsubscribed meanwhile
        self.buffering.pop(channel, None)

    async def run_writer(self) -> None:
        """Drain pending frames until the connection ends; one send at a time keeps the order."""
        while True:
            frame = self.outbound.pop()
            if frame is None:
                self._drain.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            await self._send(frame)
            self.frames_sent += 1
            self.bytes_sent += len(frame)
            if self.outbound.size < self.outbound.limit // 4:
                self._drain.set()
