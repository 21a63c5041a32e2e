"""The broker contract, run against a real Redis (Valkey), a Redis Cluster of three shards and the memory broker
alike, so that the memory broker the node's and the relay's unit tests use cannot drift from what Redis does.

The scenarios are written once, in tests/unit/test_broker_memory.py (its `CONTRACT`); here they run with a
`broker` fixture parametrised over both implementations. Below them, what each implementation does when the bus
misbehaves: out of reach (every call fails with `BusUnavailable`, handlers hear `BusLost` then `BusRestored`), out
of memory (writes refused with `BusRefused`), a restart, a dropped subscription, a slot that moves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

import pytest
from redis.asyncio import Redis, RedisCluster
from redis.crc import key_slot

from gateway.bus.broker import Broker, PartitionPublisher, RedisBroker, Subscribing
from gateway.bus.connection import Bus
from gateway.bus.errors import BusError, BusRefused, BusUnavailable
from gateway.bus.events import LINK_LOST, SLOT_MOVED, MembershipsChanged
from gateway.bus.memory import MemoryBroker
from gateway.core import envelope
from gateway.core.revocation import Revocation
from gateway.core.team import ClusterFigures
from gateway.embedded import EmbeddedValkey, EmbeddedValkeyCluster, free_port
from tests.unit import test_broker_memory as scenarios
from tests.unit.test_broker_memory import Heard, ShiftedClock, elapsing, eventually, fresh, message, running

globals().update({name: getattr(scenarios, name) for name in scenarios.CONTRACT})


@pytest.fixture(scope="module")
def valkey_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkeyCluster]:
    """Three shards of this module's own."""
    cluster = EmbeddedValkeyCluster(tmp_path_factory.mktemp("valkey-broker-cluster"), shards=3)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(params=["redis", "cluster", "memory"])
async def broker(request: pytest.FixtureRequest, redis_url: str) -> AsyncIterator[Broker]:
    if request.param == "memory":
        memory = MemoryBroker(partitions=3, clock=ShiftedClock())
        yield memory
        await memory.aclose()
        return
    if request.param == "cluster":
        cluster = request.getfixturevalue("valkey_cluster")
        # Three partitions, one to a shard; the scenarios use the first.
        redis = RedisBroker(Bus(cluster.url, cluster=True, partitions=3))
    else:  # a database of its own (the session's relay keeps its fence in db 0)
        redis = RedisBroker(Bus(redis_url.rsplit("/", 1)[0] + "/10", partitions=3))
    await _empty(redis)
    try:
        yield redis
    finally:
        await _empty(redis)
        await redis.aclose()


async def _empty(broker: RedisBroker) -> None:
    if broker.cluster:
        await broker.bus.redis.flushdb(target_nodes=RedisCluster.PRIMARIES)
    else:
        await broker.bus.redis.flushdb()


@pytest.fixture
def tag(broker: Broker) -> str:
    return broker.partitions.tags[0]


@pytest.fixture
def elapse(broker: Broker) -> Callable[[float], Awaitable[None]]:
    return elapsing(broker)


def test_every_scenario_of_the_contract_runs_here() -> None:
    assert len(scenarios.CONTRACT) >= 15
    assert all(name in globals() for name in scenarios.CONTRACT)


T = TypeVar("T")


async def retried(call: Callable[[], Awaitable[T]]) -> T:
    for _ in range(3):
        try:
            return await call()
        except BusUnavailable:
            await asyncio.sleep(0.1)
    return await call()


async def first_heard(
    broker: Broker, subscriber: Subscribing, heard: Heard, tag: str, channel: str
) -> PartitionPublisher:
    """Subscribed to `channel`, its partition's publisher taken over, and its first message heard."""
    await subscriber.subscribe(tag, channel)
    publisher = broker.publisher(tag, 1, 100, 60)
    await publisher.take_over()
    await publisher.publish([message(channel, 1, 1)])
    await eventually(lambda: len(heard.messages) == 1, "the first message")
    return publisher


# -- a bus that restarts empty: what MemoryBroker.restart() stands for


@pytest.fixture(scope="module")
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedValkey]:
    """A Valkey of this module's own, to restart without disturbing the session's."""
    server = EmbeddedValkey(tmp_path_factory.mktemp("valkey-broker"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["redis", "memory"])
async def test_a_restarted_bus_is_a_gap_then_empty(kind: str, restartable: EmbeddedValkey) -> None:
    restart: Callable[[], Awaitable[None]]
    if kind == "redis":
        broker: Broker = RedisBroker(Bus(f"redis://127.0.0.1:{restartable.port}/0"))

        async def restart() -> None:
            await asyncio.to_thread(restartable.stop)
            await asyncio.to_thread(restartable.start)
    else:
        memory = broker = MemoryBroker()

        async def restart() -> None:
            memory.restart()

    tag, team = broker.partitions.tags[0], fresh("team")
    heard = Heard()
    try:
        async with running(broker.subscriber(heard)) as subscriber:
            await subscriber.subscribe(tag, team)
            publisher = broker.publisher(tag, 1, 100, 60)
            await publisher.take_over()
            await publisher.publish([message(team, 1, 1, state_set={"counts": b"c"})], relay_cursor="1:1")
            await eventually(lambda: len(heard.messages) == 1)

            await restart()
            await eventually(lambda: len(heard.lost) >= 1 and heard.restored >= 1)
            assert set(heard.lost) == {LINK_LOST}
            assert subscriber.reconnects >= 1
            # A pooled connection from before the restart fails once (the relay and nodes retry such calls).
            assert not await retried(publisher.fence_exists)
            assert await broker.history.position(tag, team) is None
            assert await broker.channels.state(tag, team) == {}
            assert await publisher.relay_cursor() is None

            await publisher.take_over()  # the relay raises the fence again; the node's subscription is back
            await publisher.publish([message(team, 1, 2)])
            await eventually(lambda: len(heard.messages) == 2)
            assert envelope.unpack(heard.messages[-1][1]).seq == 2
    finally:
        await broker.aclose()


# -- a node's subscription that drops while the relay publishes: what MemoryBroker.drop_subscriptions() stands for


@pytest.mark.parametrize("kind", ["redis", "memory"])
async def test_what_a_dropped_subscription_missed_is_in_the_history(kind: str, redis_url: str) -> None:
    broker: Broker
    if kind == "redis":
        broker = redis = RedisBroker(Bus(redis_url.rsplit("/", 1)[0] + "/10"))
        await _empty(redis)

        async def drop() -> None:
            await redis.bus.redis.client_kill_filter(_type="pubsub")  # Redis cuts its subscribers off

        async def restore() -> None:
            pass  # the subscriber reconnects by itself
    else:
        memory = broker = MemoryBroker()

        async def drop() -> None:
            memory.drop_subscriptions()

        async def restore() -> None:
            memory.restore_connection()

    tag, channel = broker.partitions.tags[0], fresh("trajectory")
    heard = Heard()
    try:
        async with running(broker.subscriber(heard)) as subscriber:
            publisher = await first_heard(broker, subscriber, heard, tag, channel)

            await drop()
            await publisher.publish([message(channel, 1, 2), message(channel, 1, 3)])
            await restore()
            await eventually(lambda: len(heard.lost) >= 1 and heard.restored >= 1)
            await publisher.publish([message(channel, 1, 4)])
            await eventually(lambda: envelope.unpack(heard.messages[-1][1]).seq == 4)
            # Live messages are a subset; the node fills the rest from the history, which holds all of them.
            live = [envelope.unpack(d).seq for _, d in heard.messages]
            assert live[0] == 1 and live[-1] == 4 and live == sorted(live)
            missed = await broker.history.entries(tag, channel, 2, 3)
            assert [e.seq for e in missed] == [2, 3]
    finally:
        if isinstance(broker, RedisBroker):
            await _empty(broker)
        await broker.aclose()


# -- a partition's slot that moves to another shard: what MemoryBroker.move_slot() stands for


@pytest.mark.parametrize("kind", ["cluster", "memory"])
async def test_channels_follow_their_moved_slot_each_a_gap(kind: str, request: pytest.FixtureRequest) -> None:
    broker: Broker
    if kind == "cluster":
        cluster: EmbeddedValkeyCluster = request.getfixturevalue("valkey_cluster")
        broker = redis = RedisBroker(Bus(cluster.url, cluster=True, partitions=3))
        tag = broker.partitions.tags[1]
        await _empty(redis)

        async def move() -> None:
            slot = key_slot(tag.encode())
            target = next(port for port in cluster.ports if port != cluster.owner(slot))
            await asyncio.to_thread(cluster.move_slot, slot, target)
    else:
        memory = broker = MemoryBroker(partitions=3)
        tag = broker.partitions.tags[1]

        async def move() -> None:
            memory.move_slot(tag)

    team, trajectory = fresh("team"), fresh("trajectory")
    heard = Heard()
    try:
        async with running(broker.subscriber(heard)) as subscriber:
            for channel in (team, trajectory):
                await subscriber.subscribe(tag, channel)
            publisher = broker.publisher(tag, 1, 100, 60)
            await publisher.take_over()
            await publisher.publish([message(team, 1, 1, state_set={"counts": b"c"})])
            await eventually(lambda: len(heard.messages) == 1)

            await move()
            await eventually(lambda: subscriber.moves == 2 and heard.restored >= 2)
            assert heard.lost.count(SLOT_MOVED) == 2
            # The keys moved with the slot; a publish that meets the move is retried, as the relay does.
            assert await retried(lambda: broker.channels.state(tag, team)) == {
                b"seq": b"1",
                b"epoch": b"1",
                b"counts": b"c",
            }
            await retried(lambda: publisher.publish([message(team, 1, 2), message(trajectory, 1, 1)]))
            await eventually(lambda: len(heard.messages) == 3)
            assert [envelope.unpack(d).seq for _, d in heard.messages] == [1, 2, 1]
    finally:
        if isinstance(broker, RedisBroker):
            await _empty(broker)
        await broker.aclose()


async def test_a_slot_told_again_it_is_its_owner_s_is_followed_too(valkey_cluster: EmbeddedValkeyCluster) -> None:
    """Valkey drops a slot's sharded subscribers at any SETSLOT NODE, even one naming the owner it already has
    (an operator's or a tool's repeated step): the node hears `sunsubscribe` with nothing moved. It must
    subscribe again, flag the gap, and go on hearing the channel."""
    broker = RedisBroker(Bus(valkey_cluster.url, cluster=True, partitions=3))
    tag = broker.partitions.tags[2]
    channel, heard = fresh("trajectory"), Heard()
    await _empty(broker)
    try:
        async with running(broker.subscriber(heard)) as subscriber:
            publisher = await first_heard(broker, subscriber, heard, tag, channel)

            slot = key_slot(tag.encode())
            owner = Redis(host="127.0.0.1", port=valkey_cluster.owner(slot))
            try:
                await owner.execute_command(
                    "CLUSTER SETSLOT", slot, "NODE", await owner.execute_command("CLUSTER MYID")
                )
            finally:
                await owner.aclose()
            await eventually(lambda: subscriber.moves == 1 and heard.restored >= 1, "the channel followed and restored")
            assert len(heard.lost) >= 1
            await publisher.publish([message(channel, 1, 2)])
            await eventually(lambda: len(heard.messages) == 2, "the message after the repeated SETSLOT")
            assert [envelope.unpack(d).seq for _, d in heard.messages] == [1, 2]
    finally:
        await _empty(broker)
        await broker.aclose()


# -- what a node's subscription costs per message


@pytest.mark.parametrize("broker", ["redis", "cluster"], indirect=True)
async def test_a_node_s_messages_are_not_formatted_for_a_debug_line(
    broker: Broker, tag: str, caplog: pytest.LogCaptureFixture
) -> None:
    """redis-py 8.1 hands every RESP3 push to a handler that builds `"Push response: " + str(message)` whatever
    the log level (redis-py #4230): a repr of each payload, 1.6 ms for a burst's 150 KB batch, on the node's
    busiest path. The node's links speak RESP2, where a message is a plain reply: no such line is built."""
    await _no_push_lines(broker, tag, caplog)


async def test_a_redis_url_asking_for_resp3_does_not_bring_the_debug_line_back(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`?protocol=3` in REDIS_URL (copied from another client's setup) would win over redis-py's argument."""
    broker = RedisBroker(Bus(redis_url.rsplit("/", 1)[0] + "/10?protocol=3"))
    await _empty(broker)
    try:
        await _no_push_lines(broker, broker.partitions.tags[0], caplog)
    finally:
        await _empty(broker)
        await broker.aclose()


async def _no_push_lines(broker: Broker, tag: str, caplog: pytest.LogCaptureFixture) -> None:
    channel, heard = fresh("trajectory"), Heard()
    caplog.set_level(logging.DEBUG, logger="push_response")
    async with running(broker.subscriber(heard)) as subscriber:
        await subscriber.subscribe(tag, channel)
        publisher = broker.publisher(tag, 1, 100, 60)
        await publisher.take_over()
        await publisher.publish([message(channel, 1, 1), message(channel, 1, 2)])
        await eventually(lambda: len(heard.messages) == 2)
    assert [envelope.unpack(d).seq for _, d in heard.messages] == [1, 2]
    assert [r.getMessage()[:40] for r in caplog.records if r.name == "push_response"] == []


# -- a bus out of reach, or out of memory: the bus's own errors, whichever implementation


async def every_call(broker: Broker, tag: str) -> dict[str, Callable[[], Awaitable[object]]]:
    """One call of each kind a node, a relay, the CLI or a cluster makes."""
    publisher = broker.publisher(tag, 1, 100, 60)
    figures = ClusterFigures(id=1, name="gpu-1", cpu=1.0, memory=2.0, disk=3.0, network=4.0, at=1.0)

    async def inbox() -> None:
        async with broker.commands.inbox(1):
            pass

    return {
        "take over": publisher.take_over,
        "publish": lambda: publisher.publish([message("team:1", 1, 1)], relay_cursor="1:1"),
        "last seqs": lambda: publisher.last_seqs(["team:1"]),
        "behind": publisher.behind,
        "position": lambda: broker.history.position(tag, "team:1"),
        "positions": lambda: broker.history.positions({"team:1": tag}),
        "entries": lambda: broker.history.entries(tag, "team:1", 1),
        "state": lambda: broker.channels.state(tag, "team:1"),
        "fence": lambda: broker.channels.fence(tag),
        "origin": lambda: broker.channels.origin(tag),
        "presence": lambda: broker.presence.join("node", 1, 2, 8.0),
        "online": lambda: broker.presence.online(1),
        "figures": lambda: broker.figures.report(1, figures),
        "relay stats": lambda: broker.relay_stats.read([tag]),
        "announce": lambda: broker.announcements.announce(Revocation(at=1.0, user_id=1)),
        "send a command": lambda: broker.commands.send(1, b"remove"),
        "confirm": lambda: broker.commands.confirm("gw:reply:{r.x}:c1", b"done"),
        "hear commands": inbox,
    }


@pytest.mark.parametrize("kind", ["redis", "cluster", "memory"])
async def test_a_bus_out_of_reach_fails_every_call_with_bus_unavailable(kind: str, restartable: EmbeddedValkey) -> None:
    """A Redis that stopped after the broker had connected (its pooled connections dead), a Redis Cluster none of
    whose nodes answers, a memory bus told to lose its connection: each call raises the bus's own error, and a
    subscription is not confirmed."""
    broker: Broker
    if kind == "redis":
        broker = RedisBroker(Bus(f"redis://127.0.0.1:{restartable.port}/0"))
        await broker.channels.fence(broker.partitions.tags[0])  # connected
        await asyncio.to_thread(restartable.stop)
    elif kind == "cluster":
        broker = RedisBroker(Bus(f"redis://127.0.0.1:{free_port()}", cluster=True))
    else:
        memory = broker = MemoryBroker()
        memory.lose_connection()
    tag = broker.partitions.tags[0]
    try:
        failed = {}
        for name, call in (await every_call(broker, tag)).items():
            try:
                await asyncio.wait_for(call(), 10)
                failed[name] = "nothing"
            except BusError as exc:
                failed[name] = type(exc).__name__
        assert failed == dict.fromkeys(failed, "BusUnavailable")
        subscriber = broker.subscriber(Heard())
        with pytest.raises(BusUnavailable):
            await subscriber.subscribe(tag, fresh("team"), timeout=0.5)
        await subscriber.aclose()
    finally:
        await broker.aclose()
        if kind == "redis":
            await asyncio.to_thread(restartable.start)


@pytest.mark.parametrize("kind", ["redis", "memory"])
async def test_a_bus_out_of_memory_refuses_writes_with_bus_refused_and_reads_go_on(
    kind: str, restartable: EmbeddedValkey
) -> None:
    broker: Broker
    if kind == "redis":
        broker = redis = RedisBroker(Bus(f"redis://127.0.0.1:{restartable.port}/0"))
        await redis.bus.redis.flushdb()

        async def fill() -> None:
            await redis.bus.redis.config_set("maxmemory", 1)

        async def free() -> None:
            await redis.bus.redis.config_set("maxmemory", 0)
    else:
        memory = broker = MemoryBroker()

        async def fill() -> None:
            memory.fill_memory()

        async def free() -> None:
            memory.free_memory()

    tag, team = broker.partitions.tags[0], fresh("team")
    publisher = broker.publisher(tag, 1, 100, 60)
    try:
        await publisher.take_over()
        await publisher.publish([message(team, 1, 1)])
        await fill()
        try:
            with pytest.raises(BusRefused, match="^OutOfMemoryError: "):
                await publisher.publish([message(team, 1, 2)], relay_cursor="2:2")
            with pytest.raises(BusRefused):
                await broker.presence.join("node", 1, 2, 8.0)
            assert await broker.history.position(tag, team) == (1, 1)  # nothing of the refused cycle
            assert await publisher.relay_cursor() is None
            await broker.announcements.announce(MembershipsChanged([]))  # publishing to subscribers is no write
        finally:
            await free()
        await publisher.publish([message(team, 1, 2)], relay_cursor="2:2")
        assert await broker.history.position(tag, team) == (1, 2)
    finally:
        if isinstance(broker, RedisBroker):
            await broker.bus.redis.flushdb()
        await broker.aclose()
