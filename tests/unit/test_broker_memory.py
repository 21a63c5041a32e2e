"""The memory broker: the broker contract's scenarios, then what only the memory broker does (a bus that goes
away, comes back empty, moves a slot; expiry by an injected clock).

The contract scenarios (the tests up to `CONTRACT`, taking a `broker`) also run against a real Redis and a Redis
Cluster: tests/integration/test_broker_contract.py imports them and gives them its own `broker` fixture.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from gateway.bus.broker import Broker, BusBehind, Fenced, Subscribing
from gateway.bus.errors import BusError, BusUnavailable
from gateway.bus.events import (
    Announcement,
    BusEvent,
    BusLost,
    BusRestored,
    MembershipsChanged,
    OwnershipsChanged,
)
from gateway.bus.history import contiguous
from gateway.bus.memory import MemoryBroker
from gateway.bus.relay_stats import RelayStats
from gateway.core import envelope
from gateway.core.aggregate import MembershipChange, OwnershipChange
from gateway.core.publication import Publication
from gateway.core.revocation import Revocation
from gateway.core.team import ClusterFigures
from harness.waiting import eventually

_names = itertools.count(10**9 + int(time.time() * 1000) % 10**6 * 1000)


def fresh(kind: str) -> str:
    """A channel name no other test uses (the Redis ones share a server)."""
    return f"{kind}:{next(_names)}"


def message(channel: str, epoch: int, seq: int, **extra: Any) -> Publication:
    payload = b"\x81\xa1n" + bytes([seq % 128])  # MessagePack {"n": seq}
    return Publication(channel=channel, epoch=epoch, seq=seq, json=b'{"n":%d}' % seq, msgpack=payload, **extra)


class ShiftedClock:
    """Real time, moved on at will: expiry without waiting."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def elapsing(broker: Broker) -> Callable[[float], Awaitable[None]]:
    """How a scenario lets time pass: a memory broker's clock moves on, Redis's takes the time."""
    clock = broker.space.clock if isinstance(broker, MemoryBroker) else None

    async def elapse(seconds: float) -> None:
        if isinstance(clock, ShiftedClock):
            clock.offset += seconds
        else:
            await asyncio.sleep(seconds)

    return elapse


async def quiet(broker: Broker, seconds: float = 0.1) -> None:
    """Let what is on its way arrive (Redis: wait a little; memory: until its queue is empty)."""
    if isinstance(broker, MemoryBroker):
        await broker.delivered()
    else:
        await asyncio.sleep(seconds)


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    memory = MemoryBroker(partitions=3, clock=ShiftedClock())
    yield memory
    await memory.aclose()


@pytest.fixture
def elapse(broker: Broker) -> Callable[[float], Awaitable[None]]:
    return elapsing(broker)


@pytest.fixture
def tag(broker: Broker) -> str:
    return broker.partitions.tags[0]


# -- the contract: fencing


async def test_a_fenced_out_relay_publishes_nothing_of_its_cycle(broker: Broker, tag: str) -> None:
    channel = fresh("trajectory")
    old, new = broker.publisher(tag, 4, 100, 60), broker.publisher(tag, 5, 100, 60)
    await old.take_over()
    await new.take_over()
    with pytest.raises(Fenced):
        await old.publish([message(channel, 4, 1, marker=old.marker(1, 1))], relay_cursor="9:9")
    assert await broker.history.position(tag, channel) is None
    assert await broker.history.entries(tag, channel, 1) == []
    assert await new.relay_cursor() is None
    assert await new.published_markers([new.marker(1, 1)]) == set()
    assert await broker.channels.fence(tag) == 5


async def test_an_older_epoch_cannot_take_over_again(broker: Broker, tag: str) -> None:
    await broker.publisher(tag, 7, 100, 60).take_over()
    with pytest.raises(Fenced):
        await broker.publisher(tag, 6, 100, 60).take_over()
    await broker.publisher(tag, 7, 100, 60).take_over()  # the same epoch again (a retried takeover) is fine
    assert await broker.channels.fence(tag) == 7


async def test_the_fence_is_known_once_a_relay_took_over(broker: Broker, tag: str) -> None:
    publisher = broker.publisher(tag, 3, 100, 60)
    assert not await publisher.fence_exists()
    assert not await broker.channels.fence_exists(tag)
    assert await broker.channels.fence(tag) == 0
    assert await broker.channels.origin(tag) == (0, False)
    await publisher.take_over()
    assert await publisher.fence_exists()
    assert await broker.channels.fence_exists(tag)
    assert await broker.channels.fence(tag) == 3
    assert await broker.channels.origin(tag) == (3, False)  # fenced: its snapshot may still come
    await publisher.publish([], relay_cursor="5:5")  # started: where it reads the outbox from is on the bus
    assert await broker.channels.origin(tag) == (3, True)


async def test_a_partition_without_a_fence_takes_any_epochs_publish(broker: Broker, tag: str) -> None:
    """A bus that lost its keys has no fence until the relay raises it again: publishing is not refused."""
    channel = fresh("trajectory")
    await broker.publisher(tag, 2, 100, 60).publish([message(channel, 2, 1)])
    assert await broker.history.position(tag, channel) == (2, 1)
    assert not await broker.channels.fence_exists(tag)


# -- positions and history


async def test_positions_name_the_publishing_epoch_and_the_last_seq(broker: Broker, tag: str) -> None:
    channel, other, silent = fresh("trajectory"), fresh("trajectory"), fresh("trajectory")
    publisher = broker.publisher(tag, 2, 100, 60)
    await publisher.take_over()
    await publisher.publish([message(channel, 2, 1), message(channel, 2, 2), message(other, 2, 9)])
    await publisher.publish([message(channel, 2, 3)])
    assert await broker.history.position(tag, channel) == (2, 3)
    assert await broker.history.positions({channel: tag, other: tag, silent: tag}) == {
        channel: (2, 3),
        other: (2, 9),
        silent: None,
    }
    assert await publisher.last_seqs([channel, other, silent]) == {channel: 3, other: 9, silent: 0}
    successor = broker.publisher(tag, 3, 100, 60)
    await successor.take_over()
    assert await successor.last_seqs([channel]) == {channel: 3}  # sequences continue across takeovers
    await successor.publish([message(channel, 3, 4)])
    assert await broker.history.position(tag, channel) == (3, 4)


async def test_history_reads_ranges_of_the_messagepack_payloads(broker: Broker, tag: str) -> None:
    channel = fresh("trajectory")
    publisher = broker.publisher(tag, 2, 100, 60)
    await publisher.take_over()
    sent = [message(channel, 2, seq) for seq in range(1, 7)]
    await publisher.publish(sent)
    found = await broker.history.entries(tag, channel, 2, 4)
    assert [(e.epoch, e.seq, e.msgpack) for e in found] == [(2, p.seq, p.msgpack) for p in sent[1:4]]
    assert contiguous(found, 2, 4)
    assert [e.seq for e in await broker.history.entries(tag, channel, 5)] == [5, 6]
    assert await broker.history.entries(tag, channel, 7) == []
    assert await broker.history.entries(tag, fresh("trajectory"), 1) == []


async def test_history_keeps_its_length_of_newest_messages(broker: Broker, tag: str) -> None:
    channel = fresh("trajectory")
    publisher = broker.publisher(tag, 2, 5, 60)
    await publisher.take_over()
    await publisher.publish([message(channel, 2, seq) for seq in range(1, 301)])
    kept = await broker.history.entries(tag, channel, 1)
    assert [e.seq for e in kept] == [296, 297, 298, 299, 300]
    assert not contiguous(await broker.history.entries(tag, channel, 1, 10), 1, 10)


async def test_history_keeps_at_most_its_bytes_of_newest_messages(broker: Broker, tag: str) -> None:
    """Each message here is 4 bytes of MessagePack: 10 bytes hold the newest two. A message larger than the
    bound is kept alone (the newest always is), and the next ones push it out."""
    channel = fresh("trajectory")
    publisher = broker.publisher(tag, 2, 100, 60, history_bytes=10)
    await publisher.take_over()
    await publisher.publish([message(channel, 2, seq) for seq in range(1, 8)])
    assert [e.seq for e in await broker.history.entries(tag, channel, 1)] == [6, 7]
    big = Publication(channel=channel, epoch=2, seq=8, json=b'"%s"' % (b"x" * 40), msgpack=b"\xd9\x28" + b"x" * 40)
    await publisher.publish([big])
    assert [e.seq for e in await broker.history.entries(tag, channel, 1)] == [8]
    await publisher.publish([message(channel, 2, 9), message(channel, 2, 10)])
    assert [e.seq for e in await broker.history.entries(tag, channel, 1)] == [9, 10]
    await publisher.publish([message(channel, 2, seq) for seq in range(11, 40)])
    assert [e.seq for e in await broker.history.entries(tag, channel, 1)] == [38, 39]


async def test_a_seq_at_or_below_the_historys_newest_starts_it_again(broker: Broker, tag: str) -> None:
    """Redis kept a history whose positions it lost: a successor that read a lower position starts the history
    again rather than having the message refused."""
    channel = fresh("trajectory")
    publisher = broker.publisher(tag, 2, 100, 60)
    await publisher.take_over()
    await publisher.publish([message(channel, 2, seq) for seq in range(1, 6)])
    successor = broker.publisher(tag, 3, 100, 60)
    await successor.take_over()
    await successor.publish([message(channel, 3, 3)])
    assert [e.seq for e in await broker.history.entries(tag, channel, 1)] == [3]
    assert await broker.history.position(tag, channel) == (3, 3)


async def test_a_cycle_sent_again_publishes_only_what_had_not_gone_out(broker: Broker, tag: str) -> None:
    """The relay sends a cycle again when its publish failed part-way (Redis refused the second of its calls):
    the messages whose position the channel already holds in this epoch are not published twice."""
    channel = fresh("trajectory")
    heard = Heard()
    async with running(broker.subscriber(heard)) as subscriber:
        await subscriber.subscribe(tag, channel)
        publisher = broker.publisher(tag, 2, 100, 60)
        await publisher.take_over()
        await publisher.publish([message(channel, 2, 1), message(channel, 2, 2)])
        await publisher.publish([message(channel, 2, 1), message(channel, 2, 2), message(channel, 2, 3)])
        await publisher.publish([message(channel, 2, 4)])
        await eventually(lambda: len(heard.messages) >= 4)
        await quiet(broker)  # nothing more arrives
    assert [envelope.unpack(data).seq for _, data in heard.messages] == [1, 2, 3, 4]
    assert [e.seq for e in await broker.history.entries(tag, channel, 1)] == [1, 2, 3, 4]
    assert await broker.history.position(tag, channel) == (2, 4)


async def test_an_idle_channels_history_expires_but_not_its_position(
    broker: Broker, tag: str, elapse: Callable[[float], Awaitable[None]]
) -> None:
    channel = fresh("trajectory")
    publisher = broker.publisher(tag, 2, 100, history_ttl=1)
    await publisher.take_over()
    await publisher.publish([message(channel, 2, 1)])
    assert len(await broker.history.entries(tag, channel, 1)) == 1
    await elapse(1.2)
    assert await broker.history.entries(tag, channel, 1) == []
    assert await broker.history.position(tag, channel) == (2, 1)
    await publisher.publish([message(channel, 2, 2)])  # a new history starts with the next message
    assert [e.seq for e in await broker.history.entries(tag, channel, 1)] == [2]


# -- channel state


async def test_state_is_written_with_its_message(broker: Broker, tag: str) -> None:
    team = fresh("team")
    publisher = broker.publisher(tag, 3, 100, 60)
    await publisher.take_over()
    assert await broker.channels.state(tag, team) == {}
    await publisher.publish([message(team, 3, 1, state_set={"counts": b"c1", "t:1": b"s1", "t:2": b"s2"})])
    assert await broker.channels.state(tag, team) == {
        b"seq": b"1",
        b"epoch": b"3",
        b"counts": b"c1",
        b"t:1": b"s1",
        b"t:2": b"s2",
    }
    await publisher.publish([message(team, 3, 2, state_set={"counts": b"c2"}, state_del=["t:2", "t:9"])])
    assert await broker.channels.state(tag, team) == {b"seq": b"2", b"epoch": b"3", b"counts": b"c2", b"t:1": b"s1"}
    # Only the fields asked for, in order (a page of cards reads its own trajectories' summaries).
    assert await broker.channels.state_fields(tag, team, [b"t:2", b"t:1"]) == [None, b"s1"]
    assert await broker.channels.state_fields(tag, team, []) == []
    await publisher.publish([message(team, 3, 3, state_del=["t:1"])])
    assert await broker.channels.state(tag, team) == {b"seq": b"3", b"epoch": b"3", b"counts": b"c2"}


async def test_an_event_moves_the_seq_of_existing_state_only(broker: Broker, tag: str) -> None:
    team, trajectory = fresh("team"), fresh("trajectory")
    publisher = broker.publisher(tag, 1, 100, 60)
    await publisher.take_over()
    await publisher.publish([message(team, 1, 1, state_set={"counts": b"c1"})])
    await publisher.publish([message(team, 1, 2), message(trajectory, 1, 1)])
    assert await broker.channels.state(tag, team) == {b"seq": b"2", b"epoch": b"1", b"counts": b"c1"}
    assert await broker.channels.state(tag, trajectory) == {}


# -- markers and the relay cursor


async def test_a_marker_tells_a_successor_the_event_went_out(broker: Broker, tag: str) -> None:
    team = fresh("team")
    publisher = broker.publisher(tag, 1, 100, 60)
    await publisher.take_over()
    done, pending = publisher.marker(11, 1), publisher.marker(11, 2)
    assert done != pending
    assert await publisher.published_markers([done, pending]) == set()
    await publisher.publish([message(team, 1, 1, marker=done)])
    successor = broker.publisher(tag, 2, 100, 60)
    await successor.take_over()
    assert successor.marker(11, 1) == done
    assert await successor.published_markers([done, pending]) == {done}


async def test_the_relay_cursor_goes_with_the_cycle(broker: Broker, tag: str) -> None:
    publisher = broker.publisher(tag, 1, 100, 60)
    await publisher.take_over()
    assert await publisher.relay_cursor() is None
    await publisher.publish([message(fresh("trajectory"), 1, 1)], relay_cursor="10:3")
    assert await publisher.relay_cursor() == "10:3"
    await publisher.publish([message(fresh("trajectory"), 1, 1)])  # no cursor: the last one stays
    assert await publisher.relay_cursor() == "10:3"
    await publisher.publish([], relay_cursor="12:1")  # a cycle of rows that changed no channel
    assert await broker.publisher(tag, 2, 100, 60).relay_cursor() == "12:1"


async def test_a_bus_that_lost_what_the_relay_wrote_refuses_its_publish_until_it_reads_the_cursor_again(
    broker: Broker, tag: str
) -> None:
    """A failover to a replica behind the old primary: the bus holds an older relay cursor than the relay wrote.
    (A second publisher of the epoch writes that older cursor here, in every implementation alike.)"""
    channel = fresh("team")
    publisher = broker.publisher(tag, 1, 100, 60)
    await publisher.take_over()
    assert await publisher.relay_cursor() is None
    await publisher.publish([message(channel, 1, 1, state_set={"counts": b"a"})], relay_cursor="5:1")
    assert not await publisher.behind()
    await broker.publisher(tag, 1, 100, 60).publish([], relay_cursor="4:9")
    assert await publisher.behind()
    with pytest.raises(BusBehind):
        await publisher.publish([message(channel, 1, 2, state_set={"counts": b"b"})], relay_cursor="5:2")
    assert await broker.history.position(tag, channel) == (1, 1)  # nothing of the cycle was written
    assert (await broker.channels.state(tag, channel))[b"counts"] == b"a"
    assert await publisher.relay_cursor() == "4:9"  # read again: the bus is taken as it is
    await publisher.publish([message(channel, 1, 2, state_set={"counts": b"b"})], relay_cursor="5:2")
    assert await broker.history.position(tag, channel) == (1, 2)
    assert not await publisher.behind()


async def test_a_bus_without_the_fence_is_behind(broker: Broker, tag: str) -> None:
    publisher = broker.publisher(tag, 1, 100, 60)
    assert await publisher.behind()
    await publisher.take_over()
    assert not await publisher.behind()


# -- pub/sub


class Heard:
    """What a subscriber told its handler (a gateway.bus.events.BusEvents)."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self.announced: list[Announcement] = []
        self.lost: list[BusLost] = []
        self.restored = 0

    def handle_message(self, channel: str, envelope: bytes) -> None:
        self.messages.append((channel, envelope))

    def handle(self, event: BusEvent) -> None:
        match event:
            case BusLost():
                self.lost.append(event)
            case BusRestored():
                self.restored += 1
            case _:
                self.announced.append(event)


@asynccontextmanager
async def running(subscriber: Subscribing) -> AsyncIterator[Subscribing]:
    """The subscriber's run() as a node keeps it, stopped and closed at the end."""
    task = asyncio.create_task(subscriber.run())
    try:
        yield subscriber
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await subscriber.aclose()


async def test_subscribers_receive_each_envelope_in_order(broker: Broker, tag: str) -> None:
    followed, other, dropped = fresh("trajectory"), fresh("trajectory"), fresh("trajectory")
    heard = Heard()
    async with running(broker.subscriber(heard)) as subscriber:
        for channel in (followed, other, dropped):
            await subscriber.subscribe(tag, channel)
        await subscriber.unsubscribe(tag, dropped)
        await quiet(broker, 0.2)  # Redis has read the unsubscribe (never confirmed to the caller) before the publish
        publisher = broker.publisher(tag, 6, 100, 60)
        await publisher.take_over()
        cycle = [message(followed, 6, 1), message(dropped, 6, 1), message(other, 6, 1), message(followed, 6, 2)]
        await publisher.publish(cycle)
        await publisher.publish([message(followed, 6, 3)])
        await eventually(lambda: len(heard.messages) >= 4)
        await quiet(broker)  # nothing more arrives
        assert [c for c, _ in heard.messages] == [followed, other, followed, followed]
        unpacked = [envelope.unpack(data) for c, data in heard.messages if c == followed]
        assert [(e.epoch, e.seq, e.json, e.msgpack) for e in unpacked] == [
            (6, seq, p.json, p.msgpack) for seq, p in zip((1, 2, 3), (cycle[0], cycle[3], message(followed, 6, 3)))
        ]
        assert all(e.published > 0 for e in unpacked)
        assert heard.lost == []


async def test_every_node_subscribed_receives_the_same_bytes(broker: Broker, tag: str) -> None:
    channel = fresh("team")
    first, second = Heard(), Heard()
    async with (
        running(broker.subscriber(first)) as one,
        running(broker.subscriber(second)) as other,
    ):
        await one.subscribe(tag, channel)
        await one.subscribe(tag, channel)  # again: nothing changes
        await other.subscribe(tag, channel)
        await other.unsubscribe(tag, fresh("team"))  # never subscribed: nothing happens
        publisher = broker.publisher(tag, 1, 100, 60)
        await publisher.publish([message(channel, 1, 1)])
        await eventually(lambda: len(first.messages) == 1 and len(second.messages) == 1)
        await quiet(broker)
        assert first.messages == second.messages and len(first.messages) == 1


async def test_a_channel_of_another_partition_is_another_channel(broker: Broker) -> None:
    """The same channel name under two tags (two partitions' keys) never mixes."""
    if broker.partitions.count < 2:
        pytest.skip("one partition")
    here, there = broker.partitions.tags[:2]
    channel = fresh("team")
    heard = Heard()
    async with running(broker.subscriber(heard)) as subscriber:
        await subscriber.subscribe(here, channel)
        await broker.publisher(there, 1, 100, 60).publish([message(channel, 1, 7)])
        await broker.publisher(here, 1, 100, 60).publish([message(channel, 1, 1)])
        await eventually(lambda: len(heard.messages) == 1)
        await quiet(broker)
        assert [envelope.unpack(d).seq for _, d in heard.messages] == [1]
    assert await broker.history.positions({channel: there}) == {channel: (1, 7)}
    assert await broker.history.position(here, channel) == (1, 1)


async def test_every_running_subscriber_hears_each_announcement_as_the_event_it_was(broker: Broker) -> None:
    first, second = Heard(), Heard()
    hello = MembershipsChanged([])
    async with running(broker.subscriber(first)), running(broker.subscriber(second)):
        deadline = time.monotonic() + 3.0
        while not (first.announced and second.announced):  # run() subscribes in the background: until it hears
            assert time.monotonic() < deadline, "the announcements were never heard"
            await broker.announcements.announce(hello)
            await asyncio.sleep(0.02)
        await quiet(broker)
        first.announced.clear()
        second.announced.clear()
        sent: list[Announcement] = [
            MembershipsChanged([MembershipChange(team_id=1, user_id=2, member=False)]),
            OwnershipsChanged([OwnershipChange(channel="trajectory:5", team_id=3, previous_team_id=1)]),
            Revocation(at=1.5, user_id=7),
            Revocation(at=2.5, token_id="t1"),
        ]
        for announcement in sent:
            await broker.announcements.announce(announcement)
        await eventually(lambda: len(first.announced) >= 4 and len(second.announced) >= 4)
        await quiet(broker)
        # Each kind keeps its order; kinds travel on channels of their own, so across kinds order is not kept.
        for heard in (first, second):
            assert sorted(heard.announced, key=repr) == sorted(sent, key=repr)
            assert [a for a in heard.announced if isinstance(a, Revocation)] == sent[2:]
            assert heard.messages == []


# -- presence, figures, the relays' heartbeat


async def test_presence_expires_unless_refreshed(broker: Broker) -> None:
    team = next(_names)
    presence = broker.presence
    await presence.join("node-a", team, 1, 8.0)
    await presence.refresh("node-b", [(team, 1), (team, 2)], 8.0)
    now = time.time()
    assert await presence.online(team) == {1, 2}
    assert await presence.online(team, now + 20) == set()
    assert team in await presence.teams()
    await presence.leave("node-b", team, 2)
    assert await presence.online(team) == {1}
    quiet = next(_names)
    assert await presence.sweep([team, quiet], now) == {team: {1}, quiet: set()}  # who is online, per team
    assert await presence.sweep([team], now + 20) == {team: set()}  # and what expired is dropped
    assert await presence.online(team, now) == set()
    assert team in await presence.teams()  # the team stays worth looking at
    await presence.refresh("node-a", [(team, 3)], 8.0)
    await presence.leave_all("node-a", [(team, 3)])
    assert await presence.online(team) == set()


async def test_a_clusters_figures_replace_its_previous(broker: Broker) -> None:
    team = next(_names)
    first = ClusterFigures(id=1, name="gpu-1", cpu=10.0, memory=20.0, disk=30.0, network=1.0, at=100.0)
    other = ClusterFigures(id=2, name="gpu-2", cpu=1.0, memory=2.0, disk=3.0, network=4.0, at=101.0)
    await broker.figures.report(team, first)
    await broker.figures.report(team, other)
    newer = ClusterFigures(id=1, name="gpu-1", cpu=90.0, memory=20.0, disk=30.0, network=1.0, at=102.0)
    await broker.figures.report(team, newer)
    assert team in await broker.figures.teams()
    nobody = next(_names)
    read = await broker.figures.read([team, nobody])
    assert sorted(read[team], key=lambda f: f.id) == [newer, other]
    assert read[nobody] == []


async def test_relay_figures_read_back_as_written(broker: Broker, tag: str) -> None:
    stats = RelayStats(
        epoch=4,
        heartbeat=1700000000.25,
        lag_seconds=0.0123,
        changes=10,
        deltas=7,
        published=3,
        held_back_seconds=0.5,
        blocker_pid=0,
        blocker_xid=0,
    )
    await broker.relay_stats.write(tag, stats)
    other = broker.partitions.tags[0] + "-nobody"
    assert await broker.relay_stats.read([tag, other]) == [stats, None]  # None: no relay reported lately


# -- commands to clusters


async def test_a_command_reaches_a_listening_cluster_and_its_confirmation_comes_back(broker: Broker) -> None:
    cluster = next(_names)
    if not broker.cluster:  # a Redis Cluster counts one shard's listeners: never sure that nobody listens
        assert not await broker.commands.send(cluster, b"nobody listens")
    async with broker.commands.inbox(cluster) as inbox, broker.commands.replies("c1") as replies:
        assert replies.key != (await _other_reply_key(broker))
        assert await broker.commands.send(cluster, replies.key.encode())
        reply_to = (await asyncio.wait_for(anext(inbox), 3.0)).decode()
        await broker.commands.confirm(reply_to, b"done")
        await broker.commands.confirm(reply_to, b"also done")
        assert await replies.next(time.monotonic() + 3.0) == b"done"
        assert await replies.next(time.monotonic() + 3.0) == b"also done"
        assert await replies.next(time.monotonic() + 0.05) is None


async def _other_reply_key(broker: Broker) -> str:
    async with broker.commands.replies("c2") as other:
        return other.key


async def test_sockets_per_user_are_counted_across_processes(broker: Broker) -> None:
    user = next(_names)
    sockets = broker.user_sockets
    assert await sockets.claim("worker-a", user, 1, 3, 10.0)
    assert await sockets.claim("worker-a", user, 2, 3, 10.0)
    assert await sockets.claim("worker-b", user, 1, 3, 10.0)
    assert not await sockets.claim("worker-b", user, 2, 3, 10.0)  # 2 in a and 2 in b: past 3
    assert await sockets.claim("worker-a", user, 2, 3, 10.0)  # a process's count replaces its record
    await sockets.record("worker-a", {user: 1}, 10.0)  # one of a's closed
    assert await sockets.claim("worker-b", user, 2, 3, 10.0)
    assert not await sockets.claim("worker-c", user, 1, 3, 10.0)
    await sockets.record("worker-b", {user: 0}, 10.0)  # all of b's closed: its record is gone
    assert await sockets.claim("worker-c", user, 2, 3, 10.0)
    assert not await sockets.claim("worker-d", user, 1, 3, 10.0)
    assert await sockets.claim("worker-a", user, 1, 3, 10.0)  # its own place, claimed again
    assert await sockets.claim(f"worker-{user}", next(_names), 3, 3, 10.0)  # another user counts apart


CONTRACT = [name for name in list(globals()) if name.startswith("test_")]


# -- only the memory broker: a bus that misbehaves on cue, and its clock


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_lost_bus_fails_commands_and_tells_subscribers() -> None:
    broker = MemoryBroker()
    tag, channel = broker.partitions.tags[0], fresh("trajectory")
    heard = Heard()
    subscriber = broker.subscriber(heard)
    await subscriber.subscribe(tag, channel)
    publisher = broker.publisher(tag, 1, 100, 60)
    await publisher.take_over()
    await publisher.publish([message(channel, 1, 1)])
    broker.lose_connection()  # before the message was delivered: it is lost with the connection
    await broker.delivered()
    assert heard.messages == [] and heard.lost == [BusLost("link lost")] and subscriber.reconnects == 1
    with pytest.raises(BusUnavailable):
        await publisher.publish([message(channel, 1, 2)])
    with pytest.raises(BusError):  # what the gateway catches
        await broker.history.position(tag, channel)
    with pytest.raises(BusUnavailable):
        await subscriber.subscribe(tag, fresh("trajectory"), timeout=0.01)
    with pytest.raises(BusUnavailable):
        await broker.announcements.announce(Revocation(at=1.0, user_id=1))
    with pytest.raises(BusUnavailable):
        await broker.commands.send(1, b"nobody hears it")
    broker.restore_connection()
    await broker.delivered()
    assert heard.restored == 1
    assert await broker.history.position(tag, channel) == (1, 1)  # the data survived
    await publisher.publish([message(channel, 1, 2)])
    await broker.delivered()
    assert [envelope.unpack(d).seq for _, d in heard.messages] == [2]


async def test_a_restart_forgets_everything() -> None:
    broker = MemoryBroker()
    tag, team = broker.partitions.tags[0], fresh("team")
    heard = Heard()
    subscriber = broker.subscriber(heard)
    await subscriber.subscribe(tag, team)
    publisher = broker.publisher(tag, 1, 100, 60)
    await publisher.take_over()
    await publisher.publish([message(team, 1, 1, state_set={"counts": b"c"})], relay_cursor="1:1")
    await broker.presence.join("n", 5, 6, 8.0)
    broker.restart()
    await broker.delivered()
    assert (len(heard.lost), heard.restored) == (1, 1)
    assert not await publisher.fence_exists()
    assert await broker.history.position(tag, team) is None
    assert await broker.channels.state(tag, team) == {}
    assert await publisher.relay_cursor() is None
    assert await broker.presence.teams() == []
    await publisher.publish([message(team, 1, 2)])  # the relay raises the fence again and carries on
    await broker.delivered()
    # The first message was on its way when the connection dropped; the subscription survived the restart.
    assert [(c, envelope.unpack(d).seq) for c, d in heard.messages] == [(team, 2)]


async def test_a_moved_slot_is_a_gap_per_channel() -> None:
    broker = MemoryBroker(partitions=2)
    here, there = broker.partitions.tags
    heard = Heard()
    subscriber = broker.subscriber(heard)
    for channel in ("team:1", "trajectory:1"):
        await subscriber.subscribe(here, channel)
    await subscriber.subscribe(there, "team:2")
    broker.move_slot(here)
    await broker.delivered()
    await asyncio.sleep(0)
    assert (subscriber.moves, heard.lost, heard.restored) == (2, [BusLost("slot moved")] * 2, 2)


async def test_the_clock_expires_histories_markers_presence_and_relay_figures() -> None:
    clock = Clock()
    broker = MemoryBroker(clock=clock)
    tag, channel = broker.partitions.tags[0], fresh("trajectory")
    publisher = broker.publisher(tag, 1, 100, history_ttl=60)
    await publisher.take_over()
    marker = publisher.marker(1, 1)
    await publisher.publish([message(channel, 1, 1, marker=marker)])
    await broker.presence.join("n", 5, 6, 8.0)
    await broker.relay_stats.write(tag, RelayStats(1, clock.now, 0.0, 0, 0, 0, 0.0, 0, 0))
    clock.now += 9
    assert await broker.presence.online(5) == set()
    assert len(await broker.history.entries(tag, channel, 1)) == 1
    clock.now += 31
    assert await broker.relay_stats.read([tag]) == [None]
    clock.now += 21
    assert await broker.history.entries(tag, channel, 1) == []  # an idle channel's history expires...
    assert await broker.history.position(tag, channel) == (1, 1)  # ...its position does not
    assert await publisher.published_markers([marker]) == {marker}
    clock.now += 86400
    assert await publisher.published_markers([marker]) == set()
    envelope_time = envelope.published_at(await _published_envelope(broker, tag))
    assert envelope_time == clock.now


async def _published_envelope(broker: MemoryBroker, tag: str) -> bytes:
    heard = Heard()
    subscriber = broker.subscriber(heard)
    channel = fresh("trajectory")
    await subscriber.subscribe(tag, channel)
    await broker.publisher(tag, 1, 100, 60).publish([message(channel, 1, 1)])
    await broker.delivered()
    return heard.messages[0][1]


async def test_a_failing_subscriber_does_not_hold_back_the_others(caplog: pytest.LogCaptureFixture) -> None:
    broker = MemoryBroker()
    tag, channel = broker.partitions.tags[0], fresh("trajectory")

    class Failing(Heard):
        def handle_message(self, channel: str, envelope: bytes) -> None:
            raise ValueError("boom")

    heard = Heard()
    failing = broker.subscriber(Failing())
    working = broker.subscriber(heard)
    for subscriber in (failing, working):
        await subscriber.subscribe(tag, channel)
    await broker.publisher(tag, 1, 100, 60).publish([message(channel, 1, 1), message(channel, 1, 2)])
    await broker.delivered()
    assert len(heard.messages) == 2
    assert "ValueError: boom" in caplog.text
