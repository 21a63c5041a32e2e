"""`/metrics` (Prometheus), `/healthz` (the process is up) and `/readyz` (it can serve: PostgreSQL and Redis
answer, and the relay is alive and not lagging)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import cast

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..bus import keys
from .runtime import Runtime

READY_LAG = 10.0  # seconds: a relay further behind than this makes the node not ready
HEARTBEAT = 5.0  # seconds without a relay heartbeat make the node not ready


class NodeCollector(Collector):
    """Reads the live figures at scrape time; the relay's come from its stats in Redis (fetched before)."""

    def __init__(self, runtime: Runtime, relay: dict[bytes, bytes]) -> None:
        self.runtime = runtime
        self.relay = relay

    def collect(self) -> Iterator[Metric]:
        node = self.runtime.node
        hub = node.hub
        live = list(node.connections)
        yield GaugeMetricFamily("gateway_connections", "Open websocket connections", value=len(live))
        yield GaugeMetricFamily("gateway_subscriptions", "Channel subscriptions of open connections",
                                value=sum(len(c.channels) for c in live))
        yield GaugeMetricFamily("gateway_channels", "Channels this node follows in Redis", value=len(hub.subscribers))
        yield CounterMetricFamily("gateway_frames_out", "Frames written to websockets",
                                  value=hub.frames_direct + node.closed_frames + sum(c.frames_sent for c in live))
        yield CounterMetricFamily("gateway_bytes_out", "Bytes written to websockets",
                                  value=hub.bytes_direct + node.closed_bytes + sum(c.bytes_sent for c in live))
        yield CounterMetricFamily("gateway_fanout_seconds", "Time handing shared frames to local subscribers",
                                  value=hub.fanout_seconds)
        yield CounterMetricFamily("gateway_fanout_messages", "Channel messages fanned out", value=hub.fanout_messages)
        yield CounterMetricFamily("gateway_gaps", "Lost bus messages noticed by sequence", value=hub.gaps)
        yield CounterMetricFamily("gateway_resyncs", "Resyncs sent to clients", value=hub.resyncs)
        yield CounterMetricFamily("gateway_slow_closes", "Connections closed as slow consumers", value=node.slow_closes)
        yield CounterMetricFamily("gateway_redis_reconnects", "Redis subscription reconnects", value=node.subscriber.reconnects)
        r = {k.decode(): v.decode() for k, v in self.relay.items()}
        if r:
            yield GaugeMetricFamily("relay_epoch", "The active relay's epoch", value=float(r.get("epoch", 0)))
            yield GaugeMetricFamily("relay_lag_seconds", "Commit to publish, last cycle", value=float(r.get("lag_seconds", 0)))
            held = GaugeMetricFamily("relay_held_back_seconds", "How long an open transaction holds the relay back",
                                     labels=["pid", "xid"])
            held.add_metric([r.get("blocker_pid", "0"), r.get("blocker_xid", "0")], float(r.get("held_back_seconds", 0)))
            yield held
            changes, deltas = float(r.get("changes", 0)), float(r.get("deltas", 0))
            yield CounterMetricFamily("relay_changes", "Captured changes applied", value=changes)
            yield CounterMetricFamily("relay_deltas", "Job deltas published after coalescing", value=deltas)
            yield GaugeMetricFamily("relay_coalescing_ratio", "Changes per delta published", value=changes / deltas if deltas else 0.0)
            yield GaugeMetricFamily("relay_heartbeat_age_seconds", "Since the relay last reported",
                                    value=max(0.0, time.time() - float(r.get("heartbeat", 0))))


async def metrics(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    try:
        relay = cast(dict[bytes, bytes], await runtime.redis.hgetall(keys.RELAY_STATS))
    except Exception:  # a scrape must answer even when Redis does not
        relay = {}
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeCollector(runtime, relay))
    return Response(generate_latest(registry), media_type="text/plain; version=0.0.4; charset=utf-8")


async def healthz(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    return JSONResponse({"ok": True, "connections": len(runtime.node.connections), "channels": len(runtime.node.hub.subscribers)})


async def readyz(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    problems: list[str] = []
    try:
        await asyncio.wait_for(runtime.pool.fetchval("select 1"), 2)
    except Exception:
        problems.append("postgresql unreachable")
    relay: dict[bytes, bytes] = {}
    try:
        await asyncio.wait_for(runtime.redis.ping(), 2)
        relay = cast(dict[bytes, bytes], await runtime.redis.hgetall(keys.RELAY_STATS))
    except Exception:
        problems.append("redis unreachable")
    else:
        if not relay or time.time() - float(relay.get(b"heartbeat", 0)) > HEARTBEAT:
            problems.append("no active relay")
        elif float(relay.get(b"lag_seconds", 0)) > READY_LAG or float(relay.get(b"held_back_seconds", 0)) > READY_LAG:
            problems.append("relay lagging")
    body = {"ready": not problems, "problems": problems}
    return JSONResponse(body, 200 if not problems else 503)
