"""`/metrics` (Prometheus), `/healthz` (the process is up) and `/readyz` (it can serve: PostgreSQL and Redis
answer, and the relay is alive and not lagging).

`/metrics` is for scrapers: with GATEWAY_METRICS_TOKEN set they send it as a bearer token; without, only a
client on the node's own host may scrape, directly (a request a proxy forwards could come from anywhere).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
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

    def __init__(self, runtime: Runtime, relays: list[dict[bytes, bytes]]) -> None:
        self.runtime = runtime
        self.relays = relays

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
        yield CounterMetricFamily("gateway_catch_ups", "Slow consumers' channels held and caught up from history", value=node.catch_ups)
        yield CounterMetricFamily("gateway_slow_closes", "Connections closed as slow consumers", value=node.slow_closes)
        yield CounterMetricFamily("gateway_redis_reconnects", "Redis subscription reconnects", value=node.subscriber.reconnects)
        yield CounterMetricFamily("gateway_redis_slot_moves", "Channels that followed their slot to another shard",
                                  value=node.subscriber.moves)
        families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {
            "epoch": GaugeMetricFamily("relay_epoch", "The partition's active relay's epoch", labels=["partition"]),
            "lag": GaugeMetricFamily("relay_lag_seconds", "Commit to publish, last cycle", labels=["partition"]),
            # Which transaction it is (pid, xid) is in the relay's log: a label per blocker would be a new
            # series each time, and would show a scraper more than it needs.
            "held": GaugeMetricFamily("relay_held_back_seconds", "How long an open transaction holds the relay back",
                                      labels=["partition"]),
            "changes": CounterMetricFamily("relay_changes", "Captured changes applied", labels=["partition"]),
            "deltas": CounterMetricFamily("relay_deltas", "Job deltas published after coalescing", labels=["partition"]),
            "ratio": GaugeMetricFamily("relay_coalescing_ratio", "Changes per delta published", labels=["partition"]),
            "age": GaugeMetricFamily("relay_heartbeat_age_seconds", "Since the partition's relay last reported",
                                     labels=["partition"]),
        }
        for partition, stats in enumerate(self.relays):
            if not stats:
                continue
            r = {k.decode(): v.decode() for k, v in stats.items()}
            p = str(partition)
            changes, deltas = float(r.get("changes", 0)), float(r.get("deltas", 0))
            families["epoch"].add_metric([p], float(r.get("epoch", 0)))
            families["lag"].add_metric([p], float(r.get("lag_seconds", 0)))
            families["held"].add_metric([p], float(r.get("held_back_seconds", 0)))
            families["changes"].add_metric([p], changes)
            families["deltas"].add_metric([p], deltas)
            families["ratio"].add_metric([p], changes / deltas if deltas else 0.0)
            families["age"].add_metric([p], max(0.0, time.time() - float(r.get("heartbeat", 0))))
        yield from families.values()


async def relay_stats(runtime: Runtime) -> list[dict[bytes, bytes]]:
    """Each partition's relay figures (empty where no relay has reported)."""
    async with runtime.redis.pipeline(transaction=False) as pipe:
        for tag in runtime.bus.partitions.tags:
            pipe.hgetall(keys.relay_stats(tag))
        return cast(list[dict[bytes, bytes]], await pipe.execute())


def scraper_refused(request: Request, token: str) -> JSONResponse | None:
    """Why this caller may not read /metrics (None: it may)."""
    if token:
        auth = request.headers.get("authorization", "")
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        if hmac.compare_digest(given.encode(), token.encode()):
            return None
        return JSONResponse({"error": "unauthorized", "message": "/metrics needs GATEWAY_METRICS_TOKEN as a bearer token"}, 401,
                            headers={"WWW-Authenticate": "Bearer"})
    forwarded = "x-forwarded-for" in request.headers or "forwarded" in request.headers
    if not forwarded and request.client is not None and _loopback(request.client.host):
        return None
    return JSONResponse({"error": "forbidden", "message": "/metrics is served to this host only: set GATEWAY_METRICS_TOKEN"}, 403)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def metrics(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    refused = scraper_refused(request, runtime.settings.metrics_token)
    if refused is not None:
        return refused
    try:
        relays = await relay_stats(runtime)
    except Exception:  # a scrape must answer even when Redis does not
        relays = []
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NodeCollector(runtime, relays))
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
    try:
        relays = await asyncio.wait_for(relay_stats(runtime), 2)
    except Exception:
        problems.append("redis unreachable")
    else:
        # Every partition needs its relay: without one, its teams' changes do not reach anybody.
        if any(not r or time.time() - float(r.get(b"heartbeat", 0)) > HEARTBEAT for r in relays):
            problems.append("no active relay")
        elif any(float(r.get(b"lag_seconds", 0)) > READY_LAG or float(r.get(b"held_back_seconds", 0)) > READY_LAG for r in relays):
            problems.append("relay lagging")
    body = {"ready": not problems, "problems": problems}
    return JSONResponse(body, 200 if not problems else 503)
