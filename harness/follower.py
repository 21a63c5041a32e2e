"""A test subscriber that keeps what a client would: the highest version per job, the team's counts.

It checks as it goes what a client relies on: contiguous sequences per channel and snapshot pages in order
(gateway.core.follower's checks, which every client uses), never a version going backwards on a job after a
snapshot, snapshots before batches.
"""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urlsplit

import msgspec
import websockets
from websockets.typing import Origin

from gateway.core.follower import Position, Verdict
from gateway.core.model import Job

# A job's fields at their default are left out of the wire: a client puts them back.
JOB_DEFAULTS = {f.encode_name: f.default for f in msgspec.structs.fields(Job) if f.default is not msgspec.NODEFAULT}


@dataclass
class ChannelState:
    position: Position = field(default_factory=Position)  # seq, cursor, snapshot pages (gateway.core.follower)
    jobs: dict[int, dict[str, Any]] = field(default_factory=dict)
    counts: dict[str, int] | None = None
    summaries: dict[int, dict[str, Any]] = field(default_factory=dict)
    resyncs: int = 0
    snapshots: int = 0
    awaiting_snapshot: bool = False  # subscribed again: what still arrives before the snapshot is moot

    @property
    def seq(self) -> int | None:
        return self.position.seq

    @property
    def cursor(self) -> str | None:
        return self.position.cursor

    @property
    def snapshot_done(self) -> bool:
        """The snapshot's final page came (since the last resync)."""
        return self.position.ready


class Follower:
    def __init__(
        self,
        url: str,
        token: str,
        *,
        origin: str | None = None,
        resubscribe_on_gap: bool = False,
        stallable: bool = False,
        receive_buffer: int = 4096,
    ) -> None:
        self.url = url
        # stall() must stop all reading: a small receive buffer (4 KB: the kernel then holds next to nothing
        # for it), and no keepalive pings of our own (their pongs would go unread and the client would close
        # the connection itself).
        self.stallable = stallable
        self.receive_buffer = receive_buffer
        # A client that sees a sequence jump subscribes again (docs/protocol.md); off, a jump is a problem.
        self.resubscribe_on_gap = resubscribe_on_gap
        self.gap_resubscribes = 0
        self.token = token
        self.origin = origin
        self.channels: dict[str, ChannelState] = {}
        self.errors: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.closed: websockets.ConnectionClosed | None = None
        self.ws: websockets.ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    async def __aenter__(self) -> Follower:
        headers = {"Authorization": f"Bearer {self.token}"}
        options: dict[str, Any] = {}
        if self.stallable:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer)
            sock.setblocking(False)
            parts = urlsplit(self.url)
            await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
            # Uncompressed: permessage-deflate would shrink what it leaves unread tenfold, and the kernel's
            # buffers, not the node's bound, would hold it.
            options = {"sock": sock, "ping_interval": None, "compression": None}
        origin = Origin(self.origin) if self.origin is not None else None
        self.ws = await websockets.connect(
            self.url, additional_headers=headers, origin=origin, max_size=2**22, **options
        )
        self._reader = asyncio.create_task(self._read())
        return self

    def stall(self) -> None:
        """Stop reading, as a client whose event loop is stuck: the library's small queue fills, then the
        socket's receive window closes and the server's writes back up."""
        if self._reader is not None:
            self._reader.cancel()
            self._reader = None

    def wake(self) -> None:
        """Read again at full speed: what waited in the socket first, then whatever the server did meanwhile."""
        self.stall()  # a trickling reader stops between two messages
        self._reader = asyncio.create_task(self._read())

    def trickle(self, pause: float) -> None:
        """Read slowly, one message every `pause` seconds, as a client on a slow link or with a busy event loop:
        it falls behind a fast stream, yet it keeps draining its socket (and so answers the node's pings)."""
        self.stall()
        self._reader = asyncio.create_task(self._read(pause))

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self.ws is not None:
            await self.ws.close()

    async def subscribe(self, channel: str) -> None:
        self.channels[channel] = ChannelState()
        assert self.ws is not None
        await self.ws.send(json.dumps({"type": "subscribe", "channel": channel}))

    async def reconnect(self, url: str | None = None) -> None:
        """Drop the socket, connect again (maybe to another node) and resume every channel from its cursor."""
        if self._reader is not None:
            self._reader.cancel()
        assert self.ws is not None
        await self.ws.close()
        self.url = url or self.url
        await self.__aenter__()
        ws = cast(websockets.ClientConnection, self.ws)  # connected again by __aenter__
        for channel, state in self.channels.items():
            message: dict[str, Any] = {"type": "subscribe", "channel": channel}
            if state.cursor is not None:
                message["cursor"] = state.cursor
            await ws.send(json.dumps(message))

    async def send_raw(self, data: str | bytes) -> None:
        assert self.ws is not None
        await self.ws.send(data)

    async def _read(self, pause: float = 0.0) -> None:
        assert self.ws is not None
        try:
            async for raw in self.ws:
                message = json.loads(raw)
                self.messages.append(message)
                self._apply(message)
                self._changed.set()
                if pause:
                    await asyncio.sleep(pause)
        except websockets.ConnectionClosed as exc:
            self.closed = exc  # the server went away; tests that expect it look here
            self._changed.set()

    def _apply(self, m: dict[str, Any]) -> None:
        kind = m["type"]
        if kind == "error":
            self.errors.append(m)
            return
        if kind == "pong":
            return
        state = self.channels.setdefault(m["channel"], ChannelState())
        if kind == "resync":
            # As a client should: drop the channel's state and subscribe again without a cursor.
            state.resyncs += 1
            state.position.resync()
            state.awaiting_snapshot = True
            assert self.ws is not None
            asyncio.get_running_loop().create_task(
                self.ws.send(json.dumps({"type": "subscribe", "channel": m["channel"]}))
            )
            return
        if kind == "snapshot":
            page, final = m.get("page", 0), m.get("final", True)
            if state.position.snapshot(m["seq"], m["cursor"], page, final) is Verdict.GAP:
                self.problems.append(f"snapshot page {page} after page {state.position.next_page} on {m['channel']}")
                state.position.accept_page(m["seq"], m["cursor"], page, final)  # noted: take it as it comes
            if page == 0:
                state.jobs.clear()
                state.summaries.clear()
            state.awaiting_snapshot = False
            state.snapshots += page == 0
            if m.get("counts") is not None:
                state.counts = m["counts"]
            for s in m.get("trajectories") or ():
                state.summaries[s["id"]] = s
            self._apply_jobs(state, m.get("jobs") or ())
            return
        if state.awaiting_snapshot:
            return
        if not state.snapshot_done:
            self.problems.append(f"{kind} before snapshot on {m['channel']}")
        if state.position.message(m["seq"], m["cursor"]) is not Verdict.APPLY:  # a gap or a duplicate
            if self.resubscribe_on_gap:
                self.gap_resubscribes += 1
                self._apply({"type": "resync", "channel": m["channel"]})
                return
            self.problems.append(f"seq {m['seq']} after {state.seq} on {m['channel']}")
            state.position.accept(m["seq"], m["cursor"])
        if kind == "batch":
            self._apply_jobs(state, m["jobs"])
        elif kind == "summary":
            state.counts = m["counts"]
            for s in m["trajectories"]:
                if s["total"]:
                    state.summaries[s["id"]] = s
                else:
                    state.summaries.pop(s["id"], None)

    @staticmethod
    def _apply_jobs(state: ChannelState, jobs: Any) -> None:
        for job in jobs:
            job = {**JOB_DEFAULTS, **job}
            seen = state.jobs.get(job["id"])
            if seen is None or job["version"] > seen["version"]:
                state.jobs[job["id"]] = job

    def listed(self, channel: str) -> dict[int, dict[str, Any]]:
        """The jobs a person would see: the latest state of each, removed ones dropped."""
        return {i: j for i, j in self.channels[channel].jobs.items() if j.get("removed_at") is None}

    async def wait_for(self, predicate: Any, timeout: float = 30.0) -> None:
        """Wait until `predicate(self)` holds; fails the test with what was seen otherwise."""

        async def loop() -> None:
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            seen = [(m["type"], m.get("channel"), m.get("seq"), m.get("code")) for m in self.messages[-8:]]
            closed = f"; closed by the server: {self.closed}" if self.closed is not None else ""
            raise AssertionError(f"condition not met within {timeout}s; last messages: {seen}{closed}") from None
