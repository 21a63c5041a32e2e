"""A channel's snapshot, read for subscribers arriving without a cursor the history can serve.

A team channel's snapshot is the state the relay stored with its last publish (its counts and listed
trajectories read from PostgreSQL when the relay stored none); a jobs channel's is the position, then its jobs
from PostgreSQL in pages (every batch at or below the position was committed before the read). A snapshot
reads only what was read after `since` (when its subscriber began holding the channel's messages):
subscribers arriving together share those reads.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable

import msgspec

from ..bus.channels import ChannelReads, TeamState
from ..core.batching import MAX_BATCH_BYTES, MAX_JOBS_PER_BATCH
from ..core.channels import Channel
from ..core.model import Job, most_recent_first
from ..core.protocol import Snapshot, make_cursor
from .membership import ChannelTeams
from .ports import Access
from .shared import SharedReads

SNAPSHOT_TRAJECTORIES = 300  # the team channel lists the most recent few hundred, plus totals
GROUPS_PER_PAGE = 1_000
STATE_WAIT = 3.0  # a team's state missing from the bus (Redis restarted): wait this long for the relay

Anchor = Callable[[str, int, int], None]  # the position a snapshot reflects: the hub's stream starts there


def now_ms() -> int:
    return int(time.time() * 1000)


def _pages(channel: str, seq: int, cursor: str, jobs: list[Job]) -> list[Snapshot]:
    """Snapshot pages of these jobs, halved until each fits the byte bound of a batch."""
    page = Snapshot(channel=channel, seq=seq, cursor=cursor, time=0, page=0, final=False, jobs=jobs)
    if len(jobs) > 1 and len(msgspec.json.encode(page)) > MAX_BATCH_BYTES:
        half = len(jobs) // 2
        return _pages(channel, seq, cursor, jobs[:half]) + _pages(channel, seq, cursor, jobs[half:])
    return [page]


class Snapshots:
    def __init__(
        self, access: Access, reads: ChannelReads, teams: ChannelTeams, shared: SharedReads, anchor: Anchor
    ) -> None:
        self.access = access
        self.reads = reads
        self.teams = teams
        self.shared = shared
        self.anchor = anchor

    async def team(self, channel: Channel, since: int) -> tuple[int, Snapshot]:
        """The team channel's snapshot (one page) and the seq it reflects."""
        name, tag = channel.name, self.teams.tag(channel.name)
        state = await self.shared.read(("state", name), lambda: self.reads.team_state(tag, name), since)
        if state.seq is None and not await self.reads.fence_exists(tag):
            # The bus lost everything (a restart): the relay publishes every team's state again shortly.
            deadline = time.monotonic() + STATE_WAIT
            while state.seq is None and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                state = await self.reads.team_state(tag, name)
        seq = state.seq or 0
        epoch = state.epoch if state.epoch is not None else await self._fence(tag, since)
        self.anchor(name, epoch, seq)
        page = await self._team_page(channel, state, since)
        page.seq, page.cursor, page.time = seq, make_cursor(epoch, seq), now_ms()
        return seq, page

    async def _fence(self, tag: str, since: int) -> int:
        """The partition's epoch, for a channel with nothing published yet: read once for a connect storm on a
        fresh channel, as its position is, not once per subscriber."""
        return await self.shared.read(("fence", tag), lambda: self.reads.fence(tag), since)

    async def _team_page(self, channel: Channel, state: TeamState, since: int) -> Snapshot:
        counts, summaries, total = state.counts, state.summaries, state.total
        if counts is None:
            counts, summaries = await self.shared.read(
                ("team", channel.id), lambda: self.access.team_state(channel.id), since
            )
            total = len(summaries)
        summaries.sort(key=most_recent_first, reverse=True)
        return Snapshot(
            channel=channel.name,
            seq=0,
            cursor="",
            time=0,
            page=0,
            final=True,
            counts=counts,
            trajectories=summaries[:SNAPSHOT_TRAJECTORIES],
            total_trajectories=total if total is not None else len(summaries),
            presence=state.presence,
            clusters=state.clusters,
        )

    async def jobs(self, channel: Channel, since: int) -> tuple[int, AsyncIterator[Snapshot]]:
        """A jobs channel's snapshot: the seq it reflects, and its pages (read as they are taken)."""
        # The position is read before the rows: every batch at or below it was committed before the read.
        name, tag = channel.name, self.teams.tag(channel.name)
        position = await self.shared.read(("position", name), lambda: self.reads.position(tag, name), since)
        epoch, seq = position or (await self._fence(tag, since), 0)
        self.anchor(name, epoch, seq)
        return seq, self._job_pages(channel, seq, make_cursor(epoch, seq), since)

    async def _job_pages(self, channel: Channel, seq: int, cursor: str, since: int) -> AsyncIterator[Snapshot]:
        name = channel.name
        # Frame groups with their colour, computed here so the browser never recomputes thousands.
        groups = (
            await self.shared.read(("groups", name), lambda: self.access.trajectory_groups(channel.id), since)
            if channel.kind == "trajectory"
            else []
        )
        after, page = 0, 0
        while True:
            jobs = await self.shared.read(
                ("page", name, after),
                functools.partial(self.access.jobs_page, channel, after, MAX_JOBS_PER_BATCH),
                since,
            )
            final = len(jobs) < MAX_JOBS_PER_BATCH
            parts = _pages(name, seq, cursor, jobs)
            if final:
                for start in range(0, len(groups), GROUPS_PER_PAGE):  # groups travel in pages of their own
                    chunk = groups[start : start + GROUPS_PER_PAGE]
                    parts.append(
                        Snapshot(
                            channel=name, seq=seq, cursor=cursor, time=0, page=0, final=False, jobs=[], groups=chunk
                        )
                    )
            for i, part in enumerate(parts):
                part.page, part.final = page, final and i == len(parts) - 1
                part.time = now_ms()
                yield part
                page += 1
            if final:
                return
            after = jobs[-1].id
