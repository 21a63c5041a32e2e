"""The node on the in-memory broker and a PostgreSQL stand-in: subscribing, resuming, snapshot then live, a slow
consumer catching up, a bus that lost everything. No server: milliseconds each."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable

import msgspec
import pytest

from gateway.bus.events import MembershipsChanged, OwnershipsChanged
from gateway.bus.memory import MemoryBroker, MemoryPublisher
from gateway.core.aggregate import MembershipChange, OwnershipChange
from gateway.core.channels import Channel
from gateway.core.grouping import Group
from gateway.core.model import Counts, Job, TrajectorySummary
from gateway.core.protocol import Batch, Command, Pong, encode_both, json_encoder, make_cursor
from gateway.core.publication import Publication
from gateway.core.revocation import Revocation
from gateway.hub.connection import Connection
from gateway.hub.node import Node
from gateway.hub.presence import PresenceBoard

CHANNEL = "trajectory:1"
TEAM = 1


class Access:
    """PostgreSQL as the node reads it: every channel is team 1's, user 1 is its member, no jobs listed."""

    def __init__(self) -> None:
        self.while_reading_jobs: Callable[[], object] | None = None  # runs during the snapshot's read
        self.commands: list[Command] = []  # cluster 7's, as kept in PostgreSQL
        self.confirmed: set[str] = set()
        self.while_reading_commands: Callable[[], object] | None = None
        self.jobs: list[Job] = []  # every channel's listed jobs, by id
        self.groups: list[Group] = []  # every trajectory's

    async def team_of_channel(self, channel: Channel) -> int | None:
        return TEAM

    async def is_member(self, user_id: int, team_id: int) -> bool:
        return user_id == 1

    async def lost_memberships(self, pairs: set[tuple[int, int]]) -> list[tuple[int, int]]:
        return [(u, t) for u, t in pairs if u != 1]

    async def trajectory_teams(self, trajectory_ids: list[int]) -> dict[int, int]:
        return dict.fromkeys(trajectory_ids, TEAM)

    async def team_state(self, team_id: int) -> tuple[Counts, list[TrajectorySummary]]:
        return Counts(), []

    async def trajectory_groups(self, trajectory_id: int) -> list[Group]:
        return self.groups

    async def pending_commands(self, cluster_id: int, limit: int) -> tuple[int, list[Command]]:
        if self.while_reading_commands is not None:
            await self.while_reading_commands()  # type: ignore[misc]
        pending = [c for c in self.commands if c.id not in self.confirmed]
        return (self.commands[-1].seq if self.commands else 0), pending[:limit]

    async def jobs_page(self, channel: Channel, after_id: int, limit: int) -> list[Job]:
        if self.while_reading_jobs is not None:
            await self.while_reading_jobs()  # type: ignore[misc]
        return [job for job in self.jobs if job.id > after_id][:limit]


@pytest.fixture
async def world() -> AsyncIterator[tuple[Node, MemoryBroker, MemoryPublisher, Access]]:
    async with node_on(MemoryBroker(), relay_started=True) as started:
        yield started


@contextlib.asynccontextmanager
async def node_on(
    broker: MemoryBroker, relay_started: bool, history_length: int = 1000
) -> AsyncIterator[tuple[Node, MemoryBroker, MemoryPublisher, Access]]:
    """A node on the broker; a relay of epoch 1 that has started on the partition (put where it reads from on the
    bus), or one that has not yet taken it over; each channel's history `history_length` messages long."""
    publisher = broker.publisher(broker.partitions.tag(TEAM), epoch=1, history_length=history_length, history_ttl=3600)
    if relay_started:
        await publisher.take_over()
        await publisher.publish([], "1-0")
    presence = PresenceBoard(broker.presence, enabled=False)
    access = Access()
    node = Node(access, broker, max_subscriptions=10, presence=presence, keepalive=3600)
    await node.start()
    try:
        yield node, broker, publisher, access
    finally:
        await node.stop()
        await broker.aclose()


async def publish(broker: MemoryBroker, publisher: MemoryPublisher, seqs: range, pad: int = 0) -> None:
    publications = []
    for seq in seqs:
        as_json, as_msgpack = encode_both(Batch(channel=CHANNEL, seq=seq, cursor=make_cursor(1, seq), jobs=[]))
        if pad:
            as_json = as_json[:-1] + b',"pad":"' + b"x" * pad + b'"}'
        publications.append(Publication(channel=CHANNEL, epoch=1, seq=seq, json=as_json, msgpack=as_msgpack))
    await publisher.publish(publications)
    await broker.delivered()


def queued_jobs(n: int) -> list[Job]:
    """A trajectory's jobs 1..n, queued, one a frame: a snapshot of n / 500 pages."""
    return [
        Job(id=i, team_id=TEAM, trajectory_id=1, cluster_id=1, kind="preprocess", name=f"Frame {i}", status="queued",
            version=1, frame=i)
        for i in range(1, n + 1)
    ]  # fmt: skip


def received(conn: Connection) -> list[tuple[str, object]]:
    """What the client has been sent, oldest first, as (type, seq)."""
    out = []
    while (frame := conn.take()) is not None:
        message = json.loads(frame.data)
        out.append((message["type"], message.get("seq", message.get("reason"))))
    return out


def attached(node: Node, max_pending: int = 1 << 20, fmt: str = "json") -> Connection:
    conn = Connection(user_id=1, fmt=fmt, max_pending=max_pending)  # type: ignore[arg-type]  # unlinked
    node.attach(conn)
    return conn


async def test_a_subscriber_gets_a_snapshot_then_live_messages(world) -> None:
    node, broker, publisher, _ = world
    await publish(broker, publisher, range(1, 3))
    conn = attached(node)
    await node.subscribe(conn, CHANNEL)
    await publish(broker, publisher, range(3, 5))
    assert received(conn) == [("snapshot", 2), ("batch", 3), ("batch", 4)]
    assert CHANNEL not in conn.held and node.interest.subscribed == {CHANNEL}


async def test_a_subscriber_with_a_cursor_gets_exactly_what_it_missed(world) -> None:
    node, broker, publisher, _ = world
    await publish(broker, publisher, range(1, 6))
    conn = attached(node)
    await node.subscribe(conn, CHANNEL, make_cursor(1, 2))
    await publish(broker, publisher, range(6, 7))
    assert received(conn) == [("batch", 3), ("batch", 4), ("batch", 5), ("batch", 6)]


async def test_clients_resuming_from_one_cursor_together_share_each_replayed_frame(world) -> None:
    """A reconnect storm: many clients resume a channel from the same cursor at once. The history is read once
    and each missed message framed once per format (a JSON frame is a transcoding), not once per client."""
    node, broker, publisher, _ = world
    await publish(broker, publisher, range(1, 6))
    conns = [attached(node) for _ in range(3)]
    await asyncio.gather(*(node.subscribe(c, CHANNEL, make_cursor(1, 2)) for c in conns))
    sent = [[conn.take() for _ in range(3)] for conn in conns]
    assert [[json.loads(f.data)["seq"] for f in frames if f is not None] for frames in sent] == [[3, 4, 5]] * 3
    first, *others = sent
    assert all(a is b for frames in others for a, b in zip(first, frames, strict=True))


async def test_messages_published_while_the_snapshot_is_read_follow_it(world) -> None:
    node, broker, publisher, access = world
    await publish(broker, publisher, range(1, 3))

    async def meanwhile() -> None:
        access.while_reading_jobs = None
        await publish(broker, publisher, range(3, 6))  # held behind the snapshot (at 2)

    access.while_reading_jobs = meanwhile
    conn = attached(node)
    await node.subscribe(conn, CHANNEL)
    assert received(conn) == [("snapshot", 2), ("batch", 3), ("batch", 4), ("batch", 5)]


async def test_a_slow_consumer_lags_then_catches_up_from_the_history_in_order(world) -> None:
    node, broker, publisher, _ = world
    conn = attached(node, max_pending=8192)
    await node.subscribe(conn, CHANNEL)
    assert received(conn) == [("snapshot", 0)]
    await publish(broker, publisher, range(1, 41), pad=1000)  # 40 KB at a client that reads nothing: it lags
    assert conn.lags == 1 and CHANNEL in conn.held and node.catch_ups == 1
    got: list[tuple[str, object]] = []
    for _ in range(200):  # the client reads now: the rest comes from the history
        got += received(conn)
        if CHANNEL not in conn.held:
            break
        await asyncio.sleep(0)
    got += received(conn)
    assert got == [("batch", seq) for seq in range(1, 41)] and CHANNEL not in conn.held
    assert node.backlog.reads >= 1  # what did not fit came from the history
    await publish(broker, publisher, range(41, 42))
    assert received(conn) == [("batch", 41)]  # live again


async def test_a_slow_consumer_the_history_no_longer_reaches_is_told_to_reload_and_counted() -> None:
    """A client further behind than its channel's history reaches gets `resync` for the channel (the snapshot it
    then reads costs the node far more than catching up would), and the node counts it among the resyncs sent."""
    async with node_on(MemoryBroker(), relay_started=True, history_length=10) as (node, broker, publisher, _):
        conn = attached(node, max_pending=8192)
        await node.subscribe(conn, CHANNEL)
        assert received(conn) == [("snapshot", 0)]
        await publish(broker, publisher, range(1, 41), pad=1000)  # it lags early on; the history keeps 31..40
        got: list[tuple[str, object]] = []
        for _ in range(200):
            got += received(conn)
            if CHANNEL not in conn.held:
                break
            await asyncio.sleep(0)
        got += received(conn)
        assert got[-1] == ("resync", "slow_consumer") and ("batch", 40) not in got, got
        assert node.catch_ups == 1 and node.hub.resyncs == 1


async def test_a_channels_history_blocks_go_when_its_last_subscriber_leaves(world) -> None:
    """Clients that caught up through the history leave (for another node): the blocks they read are given back,
    not kept until other channels' blocks push them out of the budget."""
    node, broker, publisher, _ = world
    conns = [attached(node, max_pending=8192) for _ in range(2)]
    for conn in conns:
        await node.subscribe(conn, CHANNEL)
    await publish(broker, publisher, range(1, 41), pad=1000)  # both lag, and catch up from the history
    for _ in range(400):
        for conn in conns:
            received(conn)
        if all(CHANNEL not in conn.held for conn in conns):
            break
        await asyncio.sleep(0)
    assert node.backlog.reads >= 1 and node.backlog.channels == 1
    node.unsubscribe(conns[0], CHANNEL)
    assert node.backlog.channels == 1  # one follower left here: it may lag again
    node.unsubscribe(conns[1], CHANNEL)
    assert node.backlog.channels == 0 and node.backlog._bytes == 0


async def test_a_bus_that_lost_the_channel_resyncs_its_subscribers(world) -> None:
    node, broker, publisher, _ = world
    conn = attached(node)
    await node.subscribe(conn, CHANNEL)
    await publish(broker, publisher, range(1, 3))
    broker.forget_everything()  # Redis restarted empty
    await node.repairs.check_once()
    assert received(conn) == [("snapshot", 0), ("batch", 1), ("batch", 2), ("resync", "bus_reset")]
    assert CHANNEL not in conn.channels and CHANNEL not in node.hub.subscribers


async def test_a_snapshot_read_before_any_relay_started_is_read_again_at_the_channels_first_message() -> None:
    """A node up before the first relay on a new bus (or one restarted empty): a subscriber's snapshot is read at
    (0, 0), and the relay reads the outbox on from its own, later snapshot. What was committed between the two
    never comes as a delta, so the first message, which follows on from 0, cannot be trusted to: read again."""
    async with node_on(MemoryBroker(), relay_started=False) as (node, broker, publisher, _):
        conn = attached(node)
        await node.subscribe(conn, CHANNEL)
        assert received(conn) == [("snapshot", 0)]
        await publisher.take_over()
        await publisher.publish([], "7-0")  # the relay's start: everything up to it is in its own snapshot
        await publish(broker, publisher, range(1, 2))
        assert received(conn) == [("resync", "bus_reset")]
        await node.subscribe(conn, CHANNEL)  # the client subscribes again: a snapshot the relay's deltas follow
        await publish(broker, publisher, range(2, 3))
        assert received(conn) == [("snapshot", 1), ("batch", 2)]


async def test_a_quiet_channel_read_before_any_relay_started_is_read_again_once_one_has() -> None:
    """The same on a channel no message follows: the position check finds the relay started and resyncs it."""
    async with node_on(MemoryBroker(), relay_started=False) as (node, broker, publisher, _):
        conn = attached(node)
        await node.subscribe(conn, CHANNEL)
        await node.repairs.check_once()  # no relay yet: nothing to say
        assert received(conn) == [("snapshot", 0)]
        await publisher.take_over()
        await node.repairs.check_once()  # fenced, not yet started: its snapshot may still come after ours
        assert received(conn) == []
        await publisher.publish([], "7-0")
        await node.repairs.check_once()
        assert received(conn) == [("resync", "bus_reset")]
        await node.subscribe(conn, CHANNEL)
        await node.repairs.check_once()
        assert received(conn) == [("snapshot", 0)]  # read after the start: kept


async def test_a_gap_on_the_bus_is_filled_from_the_history(world) -> None:
    node, broker, publisher, _ = world
    conn = attached(node)
    await node.subscribe(conn, CHANNEL)
    await publish(broker, publisher, range(1, 2))
    broker.drop_subscriptions()
    await publish(broker, publisher, range(2, 4))  # nobody hears these
    broker.restore_connection()
    await broker.delivered()
    await publish(broker, publisher, range(4, 5))
    for _ in range(100):
        await asyncio.sleep(0)
    assert received(conn) == [("snapshot", 0)] + [("batch", seq) for seq in range(1, 5)]


async def test_a_channel_behind_the_bus_is_repaired_only_if_still_behind_at_the_next_check(world) -> None:
    """A slow link delivers late, not never: the periodic check reads the history only for a channel that has
    not reached, by the next check, the position the bus had at the last one."""
    node, broker, publisher, _ = world
    conn = attached(node)
    await node.subscribe(conn, CHANNEL)
    await publish(broker, publisher, range(1, 2))
    broker.drop_subscriptions()
    await publish(broker, publisher, range(2, 4))  # not heard (yet): the bus is at 3, the node at 1
    await node.repairs.check_once()
    for _ in range(100):
        await asyncio.sleep(0)
    assert received(conn) == [("snapshot", 0), ("batch", 1)]  # perhaps in flight: not yet
    await node.repairs.check_once()  # still short of 3: lost, filled from the history
    for _ in range(100):
        await asyncio.sleep(0)
    assert received(conn) == [("batch", 2), ("batch", 3)]
    assert CHANNEL in conn.channels


async def test_a_connect_storm_on_a_channel_with_nothing_published_reads_its_epoch_once(world) -> None:
    node, broker, _, _ = world
    real, calls = broker.channels.origin, 0

    async def counted(tag: str) -> tuple[int, bool]:
        nonlocal calls
        calls += 1
        return await real(tag)

    broker.channels.origin = counted  # type: ignore[method-assign]  # counts the reads, answers as the bus does
    conns = [attached(node) for _ in range(50)]
    await asyncio.gather(*(node.subscribe(conn, CHANNEL) for conn in conns))
    snapshots = [json.loads(frame.data) for conn in conns if (frame := conn.take()) is not None]
    assert [(s["type"], s["cursor"]) for s in snapshots] == [("snapshot", make_cursor(1, 0))] * 50
    assert calls == 1  # one read of the partition's epoch for the fifty, not one each


async def test_subscribers_arriving_one_after_another_at_one_position_share_its_snapshot(world, monkeypatch) -> None:
    """A snapshot is read and encoded once per position: a storm's subscribers arriving one by one (no read in
    flight to share) get the same frames, until the channel moves on or the snapshot is a second old."""
    import gateway.hub.snapshots as snapshots

    node, broker, publisher, access = world
    reads = 0
    real = access.jobs_page

    async def counted(channel: Channel, after_id: int, limit: int) -> list[Job]:
        nonlocal reads
        reads += 1
        return await real(channel, after_id, limit)

    access.jobs_page = counted  # type: ignore[method-assign]
    await publish(broker, publisher, range(1, 3))
    frames = []
    for _ in range(5):
        conn = attached(node)
        await node.subscribe(conn, CHANNEL)
        frame = conn.take()
        assert frame is not None and json.loads(frame.data)["seq"] == 2
        frames.append(frame)
    assert reads == 1 and all(f is frames[0] for f in frames)  # read once, framed once, sent five times
    await publish(broker, publisher, range(3, 4))  # the channel moved on: a new position, a new snapshot
    conn = attached(node)
    await node.subscribe(conn, CHANNEL)
    assert reads == 2 and json.loads(conn.take().data)["seq"] == 3  # type: ignore[union-attr]
    monkeypatch.setattr(snapshots, "REUSE", 0.0)  # and one a second old is read again, to keep `time` fresh
    conn = attached(node)
    await node.subscribe(conn, CHANNEL)
    assert reads == 3


async def test_subscribers_sharing_a_read_of_a_snapshot_s_jobs_share_its_encoding(world, monkeypatch) -> None:
    """Subscribers arriving together share the reads of a snapshot's pages (none is kept yet: a snapshot is kept
    once it has all been read), and each page's jobs and groups are encoded once per format for all of them: each
    subscriber gets its own pages around the same bytes, and decodes the jobs and groups as read."""
    import gateway.hub.snapshots as snapshots

    node, broker, publisher, access = world
    access.jobs = queued_jobs(1200)
    access.groups = [
        Group(key=f"frame:{i}", label=f"Frame {i}", frame=i, status="queued", total=1, counts=Counts(queued=1))
        for i in range(1, 1201)
    ]
    encoded: list[tuple[str, str, int]] = []

    class Counting:
        def __init__(self, fmt: str, encoder: msgspec.json.Encoder | msgspec.msgpack.Encoder) -> None:
            self.fmt, self.encoder = fmt, encoder

        def encode(self, items: list[Job] | list[Group]) -> bytes:
            encoded.append((self.fmt, type(items[0]).__name__ if items else "", len(items)))
            return self.encoder.encode(items)

    monkeypatch.setattr(snapshots, "json_encoder", Counting("json", snapshots.json_encoder))
    monkeypatch.setattr(snapshots, "msgpack_encoder", Counting("msgpack", snapshots.msgpack_encoder))
    await publish(broker, publisher, range(1, 3))
    conns = [attached(node, fmt=fmt) for fmt in ("json", "json", "msgpack", "msgpack")]
    listed: list[dict[int, dict[str, object]]] = [{} for _ in conns]
    grouped: list[dict[str, dict[str, object]]] = [{} for _ in conns]

    async def follow(i: int, conn: Connection) -> None:
        subscribing = asyncio.ensure_future(node.subscribe(conn, CHANNEL))  # it waits for us to read, page by page
        while True:
            frame = conn.take()
            if frame is None:
                await asyncio.sleep(0)
                continue
            page = json.loads(frame.data) if conn.format == "json" else msgspec.msgpack.decode(frame.data)
            assert page["type"] == "snapshot" and page["seq"] == 2, page
            listed[i].update((job["id"], job) for job in page["jobs"])
            grouped[i].update((group["key"], group) for group in page.get("groups", []))
            if page["final"]:
                await subscribing
                return

    await asyncio.wait_for(asyncio.gather(*(follow(i, conn) for i, conn in enumerate(conns))), 10)
    assert all(sorted(jobs) == list(range(1, 1201)) for jobs in listed)
    assert all(len(groups) == 1200 for groups in grouped)
    assert listed[0][7] == listed[2][7] == {
        "id": 7, "team_id": TEAM, "trajectory_id": 1, "cluster_id": 1, "kind": "preprocess", "name": "Frame 7",
        "status": "queued", "version": 1, "frame": 7,
    }  # fmt: skip
    assert grouped[1]["frame:7"] == grouped[3]["frame:7"] == {
        "key": "frame:7", "label": "Frame 7", "frame": 7, "status": "queued", "total": 1,
        "counts": {"queued": 1, "retrying": 0, "running": 0, "completed": 0, "failed": 0, "holding": 0,
                   "preempted": 0, "silent": 0},
    }  # fmt: skip
    # Three pages of jobs (500, 500, 200) and two of groups (1,000, 200; with an empty list of jobs), each encoded
    # once per format; before, once per subscriber, and the jobs once more per subscriber to measure the page.
    pages = [("Job", 500), ("Job", 500), ("Job", 200), ("", 0), ("Group", 1000), ("Group", 200)]
    assert sorted(encoded) == sorted((fmt, kind, n) for fmt in ("json", "msgpack") for kind, n in pages)


async def test_subscribers_that_arrived_together_read_a_big_snapshot_once_each_at_its_own_pace(world) -> None:
    """One subscriber takes a snapshot's pages as fast as they come, two others a page at a time, later: each page
    is read from PostgreSQL once between them (kept a moment for those behind), not once each."""
    node, broker, publisher, access = world
    access.jobs = queued_jobs(1200)
    reads: list[int] = []
    real = access.jobs_page

    async def counted(channel: Channel, after_id: int, limit: int) -> list[Job]:
        reads.append(after_id)
        return await real(channel, after_id, limit)

    access.jobs_page = counted  # type: ignore[method-assign]
    await publish(broker, publisher, range(1, 3))
    fast = attached(node)
    slow = [attached(node, max_pending=64 << 10) for _ in range(2)]  # a page waits for the last to be read
    subscribing = [asyncio.ensure_future(node.subscribe(conn, CHANNEL)) for conn in [fast, *slow]]

    async def follow(conn: Connection) -> set[int]:
        ids: set[int] = set()
        while True:
            frame = conn.take()
            if frame is None:
                await asyncio.sleep(0)
                continue
            page = json.loads(frame.data)
            ids.update(job["id"] for job in page["jobs"])
            if page["final"]:
                return ids

    assert await asyncio.wait_for(follow(fast), 10) == set(range(1, 1201))
    for conn in slow:
        assert await asyncio.wait_for(follow(conn), 10) == set(range(1, 1201))
    await asyncio.gather(*subscribing)
    assert sorted(reads) == [0, 500, 1000]  # three pages, each read once


@pytest.mark.parametrize("d_s_read", ["done", "in flight"])
async def test_a_snapshot_never_takes_a_page_read_before_its_own_position_was(world, d_s_read: str) -> None:
    """Subscriber C begins holding the channel; its read of the position is slow. Subscriber D, after it, reads
    the position and the first page (job 1 at version 1). Then job 1 changes (seq 3) and C's position read comes
    back: 3. D's page was read after C began holding, but before C's position: it lacks seq 3, which C drops as
    covered by its snapshot. Whether D's read is done (kept a moment) or still in flight, C must read its pages
    after its position, and end with job 1 at version 2."""
    node, broker, publisher, access = world

    def job(version: int) -> Job:
        return Job(id=1, team_id=TEAM, trajectory_id=1, cluster_id=1, kind="preprocess", name="Frame 1",
                   status="queued" if version == 1 else "running", version=version, frame=1)  # fmt: skip

    access.jobs = [job(1)]
    await publish(broker, publisher, range(1, 3))
    real_position, position_gate, positions = node.reads.position, asyncio.Event(), 0

    async def slow_first(tag: str, channel: str):  # type: ignore[no-untyped-def]
        nonlocal positions
        positions += 1
        if positions == 1:
            await position_gate.wait()  # C's read: answered only after the change below
        return await real_position(tag, channel)

    node.reads.position = slow_first  # type: ignore[method-assign]
    real_page, page_gate = access.jobs_page, asyncio.Event()

    async def page_as_of_its_start(channel: Channel, after_id: int, limit: int) -> list[Job]:
        rows = await real_page(channel, after_id, limit)  # PostgreSQL's view as the read starts
        if d_s_read == "in flight":
            await page_gate.wait()
        return rows

    access.jobs_page = page_as_of_its_start  # type: ignore[method-assign]
    c, d = attached(node), attached(node)
    subscribing_c = asyncio.ensure_future(node.subscribe(c, CHANNEL))
    for _ in range(5):
        await asyncio.sleep(0)
    subscribing_d = asyncio.ensure_future(node.subscribe(d, CHANNEL))
    if d_s_read == "done":
        await asyncio.wait_for(subscribing_d, 5)
    else:
        for _ in range(20):
            await asyncio.sleep(0)
    access.jobs = [job(2)]  # committed, then published as seq 3
    as_json, as_msgpack = encode_both(Batch(channel=CHANNEL, seq=3, cursor=make_cursor(1, 3), jobs=[job(2)]))
    await publisher.publish([Publication(channel=CHANNEL, epoch=1, seq=3, json=as_json, msgpack=as_msgpack)])
    await broker.delivered()
    position_gate.set()
    for _ in range(20):
        await asyncio.sleep(0)
    page_gate.set()
    await asyncio.wait_for(asyncio.gather(subscribing_c, subscribing_d), 5)

    def versions(conn: Connection) -> dict[int, int]:
        found: dict[int, int] = {}
        while (frame := conn.take()) is not None:
            found.update((j["id"], j["version"]) for j in json.loads(frame.data).get("jobs", []))
        return found

    assert versions(c) == {1: 2}
    assert versions(d) == {1: 2}  # its snapshot at seq 2, then seq 3 live


async def test_the_node_acts_on_each_announcement_the_bus_hands_it(world) -> None:
    """The node is the bus's handler: a member removed leaves the team's channels, a channel moved to another team
    ends its old team's subscriptions, a revocation goes to whoever listens for them."""
    node, broker, publisher, _ = world
    revoked: list[Revocation] = []
    node.on_revocation = revoked.append
    await asyncio.sleep(0)  # the subscriber's run() hears announcements once it has started
    removed = attached(node)
    await node.subscribe(removed, "team:1")
    received(removed)
    await broker.announcements.announce(MembershipsChanged([MembershipChange(team_id=TEAM, user_id=1, member=False)]))
    await broker.delivered()
    assert [m for m in received(removed) if m[0] == "error"] == [("error", None)]
    assert removed.channels == {}

    moved = attached(node)
    await node.subscribe(moved, CHANNEL)  # a member again (the stand-in says so)
    assert moved.channels == {CHANNEL: TEAM}
    await broker.announcements.announce(
        OwnershipsChanged([OwnershipChange(channel=CHANNEL, team_id=2, previous_team_id=TEAM)])
    )
    await broker.delivered()
    assert moved.channels == {}
    assert node.teams.moved == {CHANNEL}

    await broker.announcements.announce(Revocation(at=1.0, token_id="t1"))
    await broker.delivered()
    assert revoked == [Revocation(at=1.0, token_id="t1")]


# -- a cluster's command feed (gateway.hub.cluster_feeds)

CLUSTER = 7


def cluster_conn(node: Node, cluster_id: int = CLUSTER, max_pending: int = 1 << 20) -> Connection:
    conn = Connection(user_id=0, fmt="json", max_pending=max_pending)  # type: ignore[arg-type]  # unlinked
    conn.cluster_id = cluster_id
    node.attach(conn)
    return conn


def command(access: Access, command_id: str, jobs: list[int]) -> Command:
    """A command kept for cluster 7, numbered after its last."""
    seq = len(access.commands) + 1
    kept = Command(
        channel=f"cluster:{CLUSTER}", seq=seq, cursor=make_cursor(1, seq), id=command_id, action="remove", jobs=jobs
    )
    access.commands.append(kept)
    return kept


async def send(broker: MemoryBroker, kept: Command) -> bool:
    return await broker.commands.send(CLUSTER, json_encoder.encode(kept))


def commands_received(conn: Connection) -> list[tuple[str, list[str]]]:
    """What a cluster has been sent: (type, the command ids it carries)."""
    out = []
    while (frame := conn.take()) is not None:
        m = json.loads(frame.data)
        ids = [c["id"] for c in m.get("commands") or []] if m["type"] == "snapshot" else [m.get("id", m.get("code"))]
        out.append((m["type"], ids))
    return out


async def test_a_cluster_gets_its_pending_commands_then_each_new_one_once(world) -> None:
    node, broker, _, access = world
    command(access, "a", [1])
    confirmed = command(access, "b", [2])
    access.confirmed.add(confirmed.id)
    conn = cluster_conn(node)
    assert not await send(broker, command(access, "c", [3]))  # no feed yet: the sender knows at once
    await node.subscribe(conn, f"cluster:{CLUSTER}")
    assert await send(broker, command(access, "d", [4]))
    await asyncio.sleep(0)
    assert commands_received(conn) == [("snapshot", ["a", "c"]), ("command", ["d"])]


async def test_a_command_sent_while_the_snapshot_is_read_follows_it_once(world) -> None:
    node, broker, _, access = world

    async def meanwhile() -> None:
        access.while_reading_commands = None
        await send(broker, command(access, "listed", [1]))  # kept before the read: in the snapshot and live
        await asyncio.sleep(0)

    access.while_reading_commands = meanwhile
    conn = cluster_conn(node)
    await node.subscribe(conn, f"cluster:{CLUSTER}")
    assert await send(broker, command(access, "after", [2]))
    await asyncio.sleep(0)
    assert commands_received(conn) == [("snapshot", ["listed"]), ("command", ["after"])]


async def test_a_cluster_key_follows_its_own_channel_only_and_a_person_none(world) -> None:
    node, _, _, _ = world
    cluster = cluster_conn(node)
    for name in (f"cluster:{CLUSTER + 1}", "team:1", "team-jobs:1", CHANNEL):
        await node.subscribe(cluster, name)
    person = attached(node)
    await node.subscribe(person, f"cluster:{CLUSTER}")
    assert [code for _, (code,) in commands_received(cluster)] == ["forbidden"] * 4
    assert commands_received(person) == [("error", ["forbidden"])]
    assert node.cluster_feeds.feeds == {}


async def test_a_command_that_does_not_fit_resyncs_the_feed_and_the_next_snapshot_lists_it(world) -> None:
    node, broker, _, access = world
    conn = cluster_conn(node, max_pending=4096)
    await node.subscribe(conn, f"cluster:{CLUSTER}")
    assert commands_received(conn) == [("snapshot", [])]
    for i in range(3):  # a cluster that reads nothing for now
        await send(broker, command(access, f"big{i}", list(range(1, 1000))))
    await asyncio.sleep(0)
    assert not node.cluster_feeds.follows(conn, CLUSTER)
    kinds = [kind for kind, _ in commands_received(conn)]
    assert kinds[-1] == "resync" and node.cluster_feeds.resyncs == 1  # counted among the resyncs sent (/metrics)
    subscribing = asyncio.create_task(node.subscribe(conn, f"cluster:{CLUSTER}"))
    got = []
    while not subscribing.done():  # it reads now: the snapshot goes out as it drains
        got += commands_received(conn)
        await asyncio.sleep(0)
    got += commands_received(conn)
    assert got == [("snapshot", ["big0", "big1", "big2"])]


async def test_a_subscribe_that_fails_is_said_to_a_client_whose_output_is_full(world, monkeypatch) -> None:
    """A subscribe the node cannot serve (Redis or PostgreSQL away, twice) ends with an `unavailable` error: the
    client's cue to subscribe again. It went through the replies' bound and was dropped when the client's output
    was full (as right after a Redis restart resynced every channel): the client then waited for a snapshot that
    never came, and its view stayed stale."""
    node, broker, publisher, access = world
    monkeypatch.setattr("gateway.hub.node.RETRY_AFTER", 0)
    conn = attached(node, max_pending=4096)
    while not conn.refused:  # replies the client asked for and does not read, until its output is full
        conn.reply(Pong(time=0))

    async def away(channel: Channel) -> int | None:
        raise ConnectionResetError("PostgreSQL restarting")

    access.team_of_channel = away  # type: ignore[method-assign]
    await node.subscribe(conn, CHANNEL)
    errors = [m for m in (json.loads(f.data) for f in iter(conn.take, None)) if m["type"] == "error"]
    assert [(e["code"], e.get("channel")) for e in errors] == [("unavailable", CHANNEL)]
    assert CHANNEL not in conn.channels  # not subscribed: the client knows to ask again


async def test_the_node_tells_the_most_it_held_between_two_looks(world) -> None:
    node, *_ = world
    conns = [Connection(user, "json", 1 << 20) for user in (1, 2, 3)]
    for conn in conns:
        node.attach(conn)
    for conn in conns[1:]:
        node.detach(conn)
    assert node.take_most_held() == 3  # what it gives memory back after (gateway.web.node.garbage)
    assert node.take_most_held() == 1  # from there on, what it holds now
