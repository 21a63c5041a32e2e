"""A test subscriber that keeps what a client would: the highest version per job, the team's counts.

It checks as it goes what a client relies on: contiguous sequences per channel, never a version going
backwards on a job after a snapshot, snapshots before batches.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import websockets


@dataclass
class ChannelState:
    seq: int | None = None
    snapshot_done: bool = False
    jobs: dict[int, dict[str, Any]] = field(default_factory=dict)
    counts: dict[str, int] | None = None
    summaries: dict[int, dict[str, Any]] = field(default_factory=dict)
    resyncs: int = 0


class Follower:
    def __init__(self, url: str, token: str, *, origin: str | None = None) -> None:
        self.url = url
        self.token = token
        self.origin = origin
        self.channels: dict[str, ChannelState] = {}
        self.errors: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.ws: websockets.ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()

    async def __aenter__(self) -> Follower:
        headers = {"Authorization": f"Bearer {self.token}"}
        self.ws = await websockets.connect(self.url, additional_headers=headers, origin=self.origin, max_size=2**22)
        self._reader = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self.ws is not None:
            await self.ws.close()

    async def subscribe(self, channel: str) -> None:
        self.channels[channel] = ChannelState()
        assert self.ws is not None
        await self.ws.send(json.dumps({"type": "subscribe", "channel": channel}))

    async def send_raw(self, data: str | bytes) -> None:
        assert self.ws is not None
        await self.ws.send(data)

    async def _read(self) -> None:
        assert self.ws is not None
        async for raw in self.ws:
            message = json.loads(raw)
            self.messages.append(message)
            self._apply(message)
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
            state.resyncs += 1
            state.snapshot_done = False
            return
        if kind == "snapshot":
            if m.get("page", 0) == 0:
                state.jobs.clear()
                state.summaries.clear()
            state.seq = m["seq"]
            state.snapshot_done = m.get("final", True)
            if m.get("counts") is not None:
                state.counts = m["counts"]
            for s in m.get("trajectories") or ():
                state.summaries[s["id"]] = s
            self._apply_jobs(state, m.get("jobs") or ())
            return
        if not state.snapshot_done:
            self.problems.append(f"{kind} before snapshot on {m['channel']}")
        if state.seq is not None and m["seq"] != state.seq + 1:
            self.problems.append(f"seq {m['seq']} after {state.seq} on {m['channel']}")
        state.seq = m["seq"]
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
            seen = state.jobs.get(job["id"])
            if seen is None or job["version"] > seen["version"]:
                state.jobs[job["id"]] = job

    def listed(self, channel: str) -> dict[int, dict[str, Any]]:
        """The jobs a person would see: the latest state of each, removed ones dropped."""
        return {i: j for i, j in self.channels[channel].jobs.items() if j.get("removed_at") is None}

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        """Wait until `predicate(self)` holds; fails the test with what was seen otherwise."""
        async def loop() -> None:
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(loop(), timeout)
        except asyncio.TimeoutError:
            seen = [(m["type"], m.get("channel"), m.get("seq"), m.get("code")) for m in self.messages[-8:]]
            raise AssertionError(f"condition not met within {timeout}s; last messages: {seen}") from None
