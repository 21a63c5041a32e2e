"""What one published batch costs a Redis shard, for the capacity plan (docs/scaling.md).

    python -m bench.redis_cost [--messages 20000] [--nodes 1,4,16] [--cluster]

The relay's real publish path (gateway.bus.publisher: one Lua script call per cycle writing each message's
position, history entry, state and PUBLISH) against a private valkey-server, with 0..N gateway nodes' bus
subscribers (gateway.bus.subscriber) subscribed to every channel and reading. The server's own CPU, from
/proc, divided by the messages: a fixed cost per message plus a cost per subscribing node (each gets its own
copy). With `--cluster` the same against a three-shard cluster with sharded pub/sub, reporting each shard's
share.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from gateway.bus.broker import RedisBroker
from gateway.bus.events import BusEvent
from gateway.core.model import Job
from gateway.core.protocol import Batch, encode_both
from gateway.core.publication import Publication
from gateway.embedded import EmbeddedValkey, EmbeddedValkeyCluster

from .procstat import cpu_seconds

CHANNELS = 50
BATCH_JOBS = 5  # jobs per published delta batch, about what a busy trajectory channel carries per tick


def _publications(count: int, epoch: int) -> list[Publication]:
    jobs = [
        Job(
            id=i,
            team_id=1,
            trajectory_id=1,
            cluster_id=1,
            kind="analysis",
            name="Run plugin rmsd on frame",
            status="running",
            version=3,
            frame=i,
        )
        for i in range(BATCH_JOBS)
    ]
    out = []
    for seq in range(1, count + 1):
        channel = f"trajectory:{seq % CHANNELS}"
        as_json, as_msgpack = encode_both(Batch(channel=channel, seq=seq, cursor=f"{epoch}-{seq}", jobs=jobs))
        out.append(Publication(channel=channel, epoch=epoch, seq=seq // CHANNELS + 1, json=as_json, msgpack=as_msgpack))
    return out


async def _reader(broker: RedisBroker, tag: str, ready: asyncio.Event, got: list[int]) -> None:
    """A gateway node's bus subscriber (a connection of its own): subscribed to every channel, reading
    everything."""

    class Counting:
        def handle_message(self, channel: str, envelope: bytes) -> None:
            got[0] += 1

        def handle(self, event: BusEvent) -> None:
            pass

    subscriber = broker.subscriber(Counting())
    running = asyncio.create_task(subscriber.run())
    try:
        for c in range(CHANNELS):
            await subscriber.subscribe(tag, f"trajectory:{c}")
        ready.set()
        await running
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        await subscriber.aclose()


async def measure(broker: RedisBroker, pids: list[int], messages: int, nodes: int, epoch: int) -> dict[str, float]:
    tag = broker.partitions.tags[0]
    publisher = broker.publisher(tag, epoch, history_length=12_000, history_ttl=3600)
    await publisher.take_over()
    got = [0]
    readies = [asyncio.Event() for _ in range(nodes)]
    readers = [asyncio.create_task(_reader(broker, tag, r, got)) for r in readies]
    for r in readies:
        await r.wait()
    publications = _publications(messages, epoch)
    before = cpu_seconds(pids)
    started = time.perf_counter()
    for i in range(0, messages, 200):  # the relay's cycle: one pipeline of a tick's messages
        await publisher.publish(publications[i : i + 200])
    while got[0] < messages * nodes and time.perf_counter() - started < 60:
        await asyncio.sleep(0.01)
    took = time.perf_counter() - started
    after = cpu_seconds(pids)
    for task in readers:
        task.cancel()
    await asyncio.gather(*readers, return_exceptions=True)
    cpu = after - before
    return {
        "nodes": nodes,
        "messages": messages,
        "delivered": got[0],
        "seconds": round(took, 3),
        "server_cpu_s": round(cpu, 3),
        "cpu_us_per_message": round(cpu * 1e6 / messages, 2),
        "bytes_per_message": len(publications[0].json) + len(publications[0].msgpack),
    }


async def main(messages: int, node_counts: list[int], cluster: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        server: EmbeddedValkey | EmbeddedValkeyCluster
        if cluster:
            server = shards = EmbeddedValkeyCluster(Path(tmp), shards=3)
            url = shards.start()
            pids = shards.pids
        else:
            server = single = EmbeddedValkey(Path(tmp))
            url = single.start()
            pids = single.pids
        broker = RedisBroker.connect(url, cluster=cluster)
        try:
            rows = [await measure(broker, pids, messages, n, epoch) for epoch, n in enumerate(node_counts, start=1)]
        finally:
            await broker.aclose()
            server.stop()
    fixed = rows[0]["cpu_us_per_message"] if rows[0]["nodes"] == 0 else None
    per_node = None
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        per_node = round((b["cpu_us_per_message"] - a["cpu_us_per_message"]) / (b["nodes"] - a["nodes"]), 2)
    return {"cluster": cluster, "rows": rows, "fixed_us_per_message": fixed, "us_per_message_per_node": per_node}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.redis_cost", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--nodes", default="0,4,16", help="subscribing gateway nodes to try, comma-separated")
    parser.add_argument("--cluster", action="store_true", help="a three-shard cluster with sharded pub/sub")
    args = parser.parse_args()
    result = asyncio.run(main(args.messages, [int(n) for n in args.nodes.split(",")], args.cluster))
    print(json.dumps(result, indent=2))
