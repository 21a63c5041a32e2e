"""A channel's snapshot, read for subscribers arriving without a cursor the history can serve.

A team channel's snapshot is the state the relay stored with its last publish (its counts and listed
trajectories read from PostgreSQL when the relay stored none); a jobs channel's is the position, then its jobs
from PostgreSQL in pages (every batch at or below the position was committed before the read). A snapshot
reads its position only as read after `since` (when its subscriber began holding the channel's messages), and
its rows only as read after its position was (`SharedReads.mark`): subscribers arriving together share those
reads, and a page read for others a moment ago serves a subscriber whose position it follows.

Encoded once, as live frames are: a snapshot built for one position of a channel serves every subscriber who
finds the channel at that same position within `REUSE` seconds, its pages (`Page`) framed once per format. It
is valid for them: it was read after that position was, so it holds everything up to it, and what comes after
reaches them live from the position on. A reconnect storm onto a busy channel then reads and encodes each of
its positions' snapshots once instead of once per subscriber. Subscribers at different positions that share a
read of a page of jobs or groups share its encoding too (`Encoded`): only the few fields around them are theirs.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import msgspec

from ..bus.channels import ChannelReads, TeamState
from ..core.batching import MAX_BATCH_BYTES, MAX_JOBS_PER_BATCH
from ..core.channels import Channel
from ..core.grouping import Group
from ..core.model import Job, most_recent_first
from ..core.protocol import Format, Snapshot, SnapshotJobs, encode, json_encoder, make_cursor, msgpack_encoder
from ..core.wsframe import PRIVATE_LEVEL, Frame
from .membership import ChannelTeams
from .ports import Access
from .shared import SharedReads

SNAPSHOT_TRAJECTORIES = 300  # the team channel lists the most recent few hundred, plus totals
# A built snapshot serves later subscribers at the same position this long: its pages' `time` (a client's
# clock offset is taken from page 0's) is then at most this old. Snapshots of more pages are not kept.
REUSE = 1.0
REUSE_PAGES = 16
GROUPS_PER_PAGE = 1_000
STATE_WAIT = 3.0  # a team's state missing from the bus (Redis restarted): wait this long for the relay

# The position a snapshot reflects, where the hub's stream starts; and whether the snapshot is provisional (read
# before any relay put its starting point on the bus: `Hub.anchor`).
Anchor = Callable[[str, int, int, bool], None]


def now_ms() -> int:
    return int(time.time() * 1000)


# What a jobs page's fields around its jobs take at most (type, channel, seq, cursor, time, page, final): the
# jobs' own encoding must leave this much of a batch's byte bound.
ENVELOPE_BYTES = 512

T = TypeVar("T", Job, Group)


class Encoded(Generic[T]):
    """Jobs or groups as read for a snapshot, encoded once per format for every snapshot page they go into
    (subscribers that share the read share the bytes), and split once (`parts`) where too big for one page."""

    __slots__ = ("items", "_raw", "_parts")

    def __init__(self, items: list[T]) -> None:
        self.items: list[T] = items
        self._raw: dict[Format, msgspec.Raw] = {}
        self._parts: list[Encoded[T]] | None = None

    def raw(self, fmt: Format) -> msgspec.Raw:
        raw = self._raw.get(fmt)
        if raw is None:
            raw = self._raw[fmt] = msgspec.Raw((json_encoder if fmt == "json" else msgpack_encoder).encode(self.items))
        return raw

    def parts(self) -> list[Encoded[T]]:
        """These halved until each part's page fits the byte bound of a batch (jobs with long errors are big).
        Only halves are kept: a list holding this one would be a cycle, which a node's frozen collector frees
        only at its next thaw (gateway.web.node.garbage)."""
        if len(self.items) <= 1 or len(self.raw("json")) <= MAX_BATCH_BYTES - ENVELOPE_BYTES:
            return [self]
        if self._parts is None:
            half = len(self.items) // 2
            self._parts = Encoded(self.items[:half]).parts() + Encoded(self.items[half:]).parts()
        return self._parts


def chunked(groups: list[Group]) -> list[Encoded[Group]]:
    """A trajectory's groups in the pages of their own they travel in, after its jobs."""
    return [Encoded(groups[i : i + GROUPS_PER_PAGE]) for i in range(0, len(groups), GROUPS_PER_PAGE)]


class Page:
    """A snapshot page, framed once per format for every subscriber it goes to; a jobs channel's page carries
    its jobs or groups encoded already (`Encoded`)."""

    __slots__ = ("snapshot", "jobs", "groups", "_frames")

    def __init__(
        self, snapshot: Snapshot, jobs: Encoded[Job] | None = None, groups: Encoded[Group] | None = None
    ) -> None:
        self.snapshot = snapshot
        self.jobs = jobs
        self.groups = groups
        self._frames: dict[Format, Frame] = {}

    def frame(self, fmt: Format) -> Frame:
        frame = self._frames.get(fmt)
        if frame is None:
            frame = self._frames[fmt] = Frame(encode(self._message(fmt), fmt), fmt == "json", PRIVATE_LEVEL)
        return frame

    def _message(self, fmt: Format) -> Snapshot | SnapshotJobs:
        s, jobs, groups = self.snapshot, self.jobs, self.groups
        if jobs is None:
            return s
        return SnapshotJobs(
            channel=s.channel,
            seq=s.seq,
            cursor=s.cursor,
            time=s.time,
            page=s.page,
            final=s.final,
            jobs=jobs.raw(fmt),
            groups=None if groups is None else groups.raw(fmt),
        )


@dataclass
class Built:
    """A channel's snapshot at one position, as built for its first subscriber there."""

    position: tuple[int, int]
    at: float  # time.monotonic() when it was read
    pages: list[Page]


class Snapshots:
    def __init__(
        self, access: Access, reads: ChannelReads, teams: ChannelTeams, shared: SharedReads, anchor: Anchor
    ) -> None:
        self.access = access
        self.reads = reads
        self.teams = teams
        self.shared = shared
        self.anchor = anchor
        self.built: dict[str, Built] = {}  # per channel, its latest snapshot, for `REUSE` seconds
        self.reused = 0  # subscribers served a snapshot built for an earlier one (for /metrics)

    def _reusable(self, name: str, position: tuple[int, int]) -> Built | None:
        built = self.built.get(name)
        if built is None or built.position != position or time.monotonic() - built.at > REUSE:
            return None
        self.reused += 1
        return built

    def _keep(self, name: str, position: tuple[int, int], at: float, pages: list[Page]) -> None:
        now = time.monotonic()
        if len(self.built) >= 64:  # what is older than REUSE serves nobody: memory follows the last second's
            self.built = {n: b for n, b in self.built.items() if now - b.at <= REUSE}
        self.built[name] = Built(position, at, pages)

    async def team(self, channel: Channel, since: int) -> tuple[int, Page]:
        """The team channel's snapshot (one page) and the seq it reflects."""
        name, tag = channel.name, self.teams.tag(channel.name)
        state = await self.shared.read(("state", name), lambda: self.reads.team_state(tag, name), since)
        if state.seq is None and not await self.reads.fence_exists(tag):
            # The bus lost everything (a restart): the relay publishes every team's state again shortly.
            deadline = time.monotonic() + STATE_WAIT
            while state.seq is None and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                state = await self.reads.team_state(tag, name)
        seq, epoch, relayed = state.seq or 0, state.epoch, True
        if epoch is None:
            epoch, relayed = await self._origin(tag, since)
        self.anchor(name, epoch, seq, not relayed)
        built = self._reusable(name, (epoch, seq)) if state.seq is not None else None
        if built is not None:
            return seq, built.pages[0]
        at = time.monotonic()
        page = await self._team_page(channel, state, self.shared.mark())  # what it reads: after the state
        page.seq, page.cursor, page.time = seq, make_cursor(epoch, seq), now_ms()
        shared = Page(page)
        if state.seq is not None:  # a state the relay stored: the same at this position for everybody
            self._keep(name, (epoch, seq), at, [shared])
        return seq, shared

    async def _origin(self, tag: str, since: int) -> tuple[int, bool]:
        """The partition's epoch, for a channel with nothing published yet, and whether a relay has started on
        it: read once for a connect storm on a fresh channel, as its position is, not once per subscriber."""
        return await self.shared.read(("origin", tag), lambda: self.reads.origin(tag), since)

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

    async def jobs(self, channel: Channel, since: int) -> tuple[int, AsyncIterator[Page]]:
        """A jobs channel's snapshot: the seq it reflects, and its pages (read as they are taken)."""
        # The position is read before the rows: every batch at or below it was committed before the read.
        name, tag = channel.name, self.teams.tag(channel.name)
        position = await self.shared.read(("position", name), lambda: self.reads.position(tag, name), since)
        if position is not None:
            (epoch, seq), relayed = position, True
        else:
            (epoch, relayed), seq = await self._origin(tag, since), 0
        self.anchor(name, epoch, seq, not relayed)
        # A channel with nothing published yet is at (epoch, 0): a snapshot read there holds everything up to
        # it just the same, and whatever commits after reaches its subscribers from seq 1 on.
        built = self._reusable(name, (epoch, seq))
        if built is not None:
            return seq, _replay(built.pages)
        # Its pages are read after its position was: a read sent since it began holding, but before its position
        # was read (another subscriber's, in flight or kept), may lack a batch at or below the position.
        return seq, self._recorded(name, (epoch, seq), channel, self.shared.mark())

    async def _recorded(
        self, name: str, position: tuple[int, int], channel: Channel, since: int
    ) -> AsyncIterator[Page]:
        """The pages as read, kept for later subscribers once all are read (a small enough snapshot)."""
        at, pages = time.monotonic(), list[Page]()
        epoch, seq = position
        async for page in self._job_pages(channel, seq, make_cursor(epoch, seq), since):
            if len(pages) <= REUSE_PAGES:
                pages.append(page)
            yield page
        if len(pages) <= REUSE_PAGES:
            self._keep(name, position, at, pages)

    async def _job_pages(self, channel: Channel, seq: int, cursor: str, since: int) -> AsyncIterator[Page]:
        """The pages, each read as the last is taken. What is read is kept a moment (`SharedReads`, `keep`): the
        subscribers that arrived together read a big snapshot's pages once between them, each at its own pace."""
        name, after, page = channel.name, 0, 0
        while True:
            read = await self.shared.read(
                ("page", name, after), functools.partial(self._jobs, channel, after), since, keep=True
            )
            final = len(read.items) < MAX_JOBS_PER_BATCH
            parts: list[tuple[Encoded[Job], Encoded[Group] | None]] = [(part, None) for part in read.parts()]
            if final and channel.kind == "trajectory":  # its groups travel last, in pages of their own
                groups = await self.shared.read(
                    ("groups", name), functools.partial(self._groups, channel), since, keep=True
                )
                parts += [(EMPTY, chunk) for chunk in groups]
            for i, (jobs, chunk) in enumerate(parts):
                snapshot = Snapshot(
                    channel=name,
                    seq=seq,
                    cursor=cursor,
                    time=now_ms(),
                    page=page,
                    final=final and i == len(parts) - 1,
                )
                yield Page(snapshot, jobs, chunk)
                page += 1
            if final:
                return
            after = read.items[-1].id

    async def _jobs(self, channel: Channel, after: int) -> Encoded[Job]:
        return Encoded(await self.access.jobs_page(channel, after, MAX_JOBS_PER_BATCH))

    async def _groups(self, channel: Channel) -> list[Encoded[Group]]:
        """A trajectory's frame groups with their colour, computed here so the browser never recomputes thousands."""
        return chunked(await self.access.trajectory_groups(channel.id))


EMPTY: Encoded[Job] = Encoded([])  # a page of groups alone carries an empty list of jobs


async def _replay(pages: list[Page]) -> AsyncIterator[Page]:
    for page in pages:
        yield page
