"""`/metrics` (Prometheus), `/healthz` (the process is up) and `/readyz` (it can serve: PostgreSQL and Redis
answer, and the relay is alive and not lagging; and it is not shutting down, gateway.web.node.leaving).

`/metrics` is for scrapers (gateway.exposition says who may scrape). A node exports its own figures and
the process's; the relay's are the relay process's own to export (gateway.relay.metrics), except in
`gateway demo`, whose relay runs in this process: `also_export` adds them here.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...bus.broker import RelayStats
from ...config import WORKER_ENV
from ...exposition import REDIS_WITHIN, RedisUp, exposition, scraper_refused
from ...store.figures import ping
from ..runtime import Runtime
from .leaving import Leaving

READY_LAG = 10.0  # seconds: a relay further behind than this makes the node not ready
HEARTBEAT = 5.0  # seconds without a relay heartbeat make the node not ready
STALLED = 5.0  # seconds without a turn of the node's loop before /healthz says it is stuck (a probe's timeout)
READY_EVERY = 1.0  # seconds between two of the node's own readiness checks (`Readiness`)
READY_FRESH = 3.0  # seconds the last of them is answered from, off the node's loop


class NodeCollector(Collector):
    """Reads the live figures at scrape time; the relays' heartbeats come from Redis (fetched before; None: Redis
    did not answer)."""

    def __init__(self, runtime: Runtime, relays: list[RelayStats | None] | None) -> None:
        self.runtime = runtime
        self.relays = relays

    def _admission(self) -> Iterator[Metric]:
        """How late the event loop runs, and what the handshake's admission makes of it (gateway.core.admission)."""
        lag, admission = self.runtime.loop_lag, self.runtime.admission
        if lag is not None:
            yield HistogramMetricFamily(
                "gateway_event_loop_lag_seconds",
                "How late a 50 ms timer fires on the node's event loop: what everything else waits behind",
                buckets=lag.histogram.buckets(),
                sum_value=lag.histogram.sum,
            )
        collector = self.runtime.collector
        if collector is not None:
            pauses = HistogramMetricFamily(
                "gateway_gc_pause_seconds",
                "Passes of Python's cyclic garbage collector, by generation: the event loop stops for each",
                labels=["generation"],
            )
            for generation, histogram in enumerate(collector.histograms):
                pauses.add_metric([str(generation)], histogram.buckets(), histogram.sum)
            yield pauses
            yield GaugeMetricFamily(
                "gateway_gc_frozen_objects",
                "Objects the collector's passes skip (gc.freeze): what outlived its younger passes, until thawed",
                value=gc.get_freeze_count(),
            )
        memory = self.runtime.memory
        if memory is not None:
            yield CounterMetricFamily(
                "gateway_memory_returns",
                "Times the node gave freed memory back to the system after many connections left",
                value=memory.returns,
            )
        if admission is not None:
            yield GaugeMetricFamily(
                "gateway_admission_rate",
                "New websockets a second the node takes now (GATEWAY_ADMISSION_RATE, less while its loop runs late)",
                value=admission.current,
            )
            yield CounterMetricFamily(
                "gateway_handshakes_refused",
                "Websocket handshakes answered 503 busy (a reconnect storm, or a loop running late)",
                value=admission.refused_total,
            )

    def collect(self) -> Iterator[Metric]:
        node = self.runtime.node
        hub = node.hub
        live = list(node.connections)
        yield GaugeMetricFamily("gateway_connections", "Open websocket connections", value=len(live))
        yield GaugeMetricFamily(
            "gateway_subscriptions",
            "Channel subscriptions of open connections",
            value=sum(len(c.channels) for c in live),
        )
        yield GaugeMetricFamily("gateway_channels", "Channels this node follows in Redis", value=len(hub.subscribers))
        yield CounterMetricFamily(
            "gateway_sent_frames",
            "Frames written to websockets",
            value=hub.frames_direct + node.closed_frames + sum(c.frames_sent for c in live),
        )
        yield CounterMetricFamily(
            "gateway_sent_bytes",
            "Bytes written to websockets",
            value=hub.bytes_direct + node.closed_bytes + sum(c.bytes_sent for c in live),
        )
        yield CounterMetricFamily(
            "gateway_fanout_seconds", "Time handing shared frames to local subscribers", value=hub.fanout_seconds
        )
        yield CounterMetricFamily("gateway_fanout_messages", "Channel messages fanned out", value=hub.fanout_messages)
        latency = node.publish_to_write
        yield HistogramMetricFamily(
            "gateway_publish_to_write_seconds",
            "From the relay's publish (its clock) to this node writing the message to its subscribers' sockets",
            buckets=latency.buckets(),
            sum_value=latency.sum,
        )
        delivery = HistogramMetricFamily(
            "gateway_delivery_lag_seconds",
            "From a change's commit in PostgreSQL (the oldest of its relay cycle) to this node writing the message"
            " to its subscribers' sockets, by channel kind",
            labels=["kind"],
        )
        for kind, lag in sorted(node.delivery_lag.items()):
            delivery.add_metric([kind], lag.buckets(), lag.sum)
        yield delivery
        yield CounterMetricFamily("gateway_gaps", "Lost bus messages noticed by sequence", value=hub.gaps)
        yield from self._admission()
        resyncs = hub.resyncs + node.cluster_feeds.resyncs  # a channel's, one client's (Node._resync), a feed's
        yield CounterMetricFamily("gateway_resyncs", "Resyncs sent to clients", value=resyncs)
        yield CounterMetricFamily(
            "gateway_catch_ups", "Slow consumers' channels held and caught up from history", value=node.catch_ups
        )
        yield CounterMetricFamily("gateway_slow_closes", "Connections closed as slow consumers", value=node.slow_closes)
        yield CounterMetricFamily(
            "gateway_snapshots_reused",
            "Subscribers sent a snapshot already read and framed for an earlier one at the same position",
            value=node.snapshots.reused,
        )
        yield CounterMetricFamily(
            "gateway_redis_reconnects", "Redis subscription reconnects", value=node.subscriber.reconnects
        )
        yield GaugeMetricFamily(
            "gateway_redis_subscription_up",
            "1 while every pub/sub link to Redis answers (a silent one is PINGed, then taken for dead)",
            value=0 if node.subscriber.lost_since is not None else 1,
        )
        yield CounterMetricFamily(
            "gateway_redis_slot_moves",
            "Channels that followed their slot to another shard",
            value=node.subscriber.moves,
        )
        yield from relay_families(self.relays, time.time())


def relay_families(relays: list[RelayStats | None] | None, now: float) -> Iterator[Metric]:
    """What /readyz judges, as this node sees it in Redis (None: Redis did not answer). Every node sees the same
    heartbeats: aggregate with max()."""
    yield from RedisUp(relays is not None).collect()
    if relays is None:
        return  # unknown: gateway_redis_up says why
    age = GaugeMetricFamily(
        "gateway_relay_heartbeat_age_seconds",
        "Since the partition's relay last reported in Redis",
        labels=["partition"],
    )
    alive = GaugeMetricFamily(
        "gateway_relay_alive",
        f"Whether the partition's relay reported in Redis within {HEARTBEAT:g} s (/readyz's 'no active relay')",
        labels=["partition"],
    )
    for partition, stats in enumerate(relays):
        if stats is not None:
            age.add_metric([str(partition)], max(0.0, now - stats.heartbeat))
        alive.add_metric([str(partition)], 1 if stats is not None and now - stats.heartbeat <= HEARTBEAT else 0)
    yield age
    yield alive


def also_export(app: Starlette, collector: Collector) -> None:
    """Add a collector of this process to the node's /metrics (the demo's in-process relay)."""
    app.state.extra_collectors = [*getattr(app.state, "extra_collectors", []), collector]


async def relay_figures(runtime: Runtime) -> list[RelayStats | None]:
    """Each partition's relay figures (None where no relay has reported)."""
    broker = runtime.broker
    return await broker.relay_stats.read(broker.partitions.tags)


async def metrics(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    refused = scraper_refused(request, runtime.settings.metrics_token)
    if refused is not None:
        return refused
    relays: list[RelayStats | None] | None
    try:
        relays = await asyncio.wait_for(relay_figures(runtime), REDIS_WITHIN)
    except Exception:  # a scrape must answer even when Redis does not (gateway_redis_up 0)
        relays = None
    state = request.app.state
    http: list[Collector] = [state.http_figures] if hasattr(state, "http_figures") else []
    return exposition([NodeCollector(runtime, relays), *http, *getattr(state, "extra_collectors", [])])


def liveness(runtime: Runtime) -> tuple[dict[str, object], int]:
    """/healthz's answer and status: what the node holds, and whether its loop still runs."""
    answer: dict[str, object] = {
        "ok": True,
        "connections": len(runtime.node.connections),
        "channels": len(runtime.node.hub.subscribers),
    }
    worker = os.environ.get(WORKER_ENV)
    if worker is not None:  # `serve --workers N`: which of them answered
        answer["worker"] = int(worker)
    lag = runtime.loop_lag
    still = time.monotonic() - lag.ticked if lag is not None and lag.ticked is not None else 0.0
    if still > STALLED:
        answer["ok"] = False
        answer["problem"] = f"the event loop has not run for {still:.1f} s"
        return answer, 503
    return answer, 200


async def healthz(request: Request) -> Response:
    answer, status = liveness(request.app.state.runtime)
    return JSONResponse(answer, status)


def readiness(leaving: Leaving | None, problems: list[str]) -> JSONResponse:
    """/readyz's answer: 503 while the node is leaving, or with what is wrong."""
    if leaving is not None and leaving.since is not None:  # stopped: the load balancer takes the node out
        return JSONResponse({"ready": False, "problems": ["shutting down"]}, 503)
    return JSONResponse({"ready": not problems, "problems": problems}, 200 if not problems else 503)


async def readyz(request: Request) -> Response:
    leaving: Leaving | None = getattr(request.app.state, "leaving", None)
    if leaving is not None and leaving.since is not None:
        return readiness(leaving, [])
    return readiness(leaving, await not_ready(request.app.state.runtime))


async def not_ready(runtime: Runtime) -> list[str]:
    """What keeps the node from serving: its databases out of reach, or a partition without a current relay."""
    problems: list[str] = []
    try:
        await asyncio.wait_for(ping(runtime.pool), 2)
    except Exception:
        problems.append("postgresql unreachable")
    if runtime.node.subscriber.lost_since is not None:  # a link that answers no PING, or keeps dropping
        problems.append("redis subscription lost")
    try:
        relays = await asyncio.wait_for(relay_figures(runtime), 2)
    except Exception:
        problems.append("redis unreachable")
    else:
        # Every partition needs its relay: without one, its teams' changes do not reach anybody.
        if any(r is None or time.time() - r.heartbeat > HEARTBEAT for r in relays):
            problems.append("no active relay")
        elif any(r is not None and max(r.lag_seconds, r.held_back_seconds) > READY_LAG for r in relays):
            problems.append("relay lagging")
    return problems


class Readiness:
    """The node's readiness, checked on its loop every READY_EVERY seconds, for the health port's thread to answer
    /readyz ready from while it is fresh (gateway.web.node.health_port): a load balancer's check then never waits
    behind a storm the node is taking; a problem, or a node too busy to check again, is asked on its loop."""

    def __init__(self) -> None:
        self.ready_at: float | None = None  # time.monotonic() of the last check, if it found nothing wrong

    def ready_lately(self) -> bool:
        """Whether the last check found nothing wrong, and is at most READY_FRESH seconds old."""
        return self.ready_at is not None and time.monotonic() - self.ready_at <= READY_FRESH

    async def run(self, runtime: Runtime) -> None:
        while True:
            problems = await not_ready(runtime)
            self.ready_at = None if problems else time.monotonic()
            await asyncio.sleep(READY_EVERY)
