"""The relay's own figures and its /metrics endpoint (`GATEWAY_RELAY_METRICS_PORT`).

Each relay process exports what it does for the partitions it serves, so every relay series exists once and a
`sum()` over relays adds up. Nodes do not re-export them (they read the relay's heartbeat in Redis only for
/readyz); `gateway demo` runs its relay inside the web process, whose /metrics then carries them.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..core.batching import Batcher
from ..core.histogram import Histogram
from ..exposition import REDIS_WITHIN, RedisUp, exposition, scraper_refused
from ..store.joint_reads import JointReads
from ..store.outbox import Blocker
from ..web.server.limits import HttpLimits
from ..web.server.serve import Server
from ..web.server.served import Served

log = logging.getLogger(__name__)

STOP_WITHIN = 2.0  # seconds for the endpoint's server to close before it is cancelled


@dataclass
class PartitionFigures:
    """One partition's figures in this process. Counters add up over every time it served the partition (a
    takeover starts a new Batcher, whose own counts start at zero)."""

    core: Batcher | None = None  # while serving
    changes_before: int = 0  # what earlier Batchers of this process counted
    deltas_before: int = 0
    published: int = 0
    cycles: int = 0  # cycles run, each publishing what is due: most of the relay's cost is per cycle
    reads: int = 0  # the cycles that read the outbox (asleep, one woken only for what is due does not)
    lag: float = 0.0  # commit to publish of the newest change, in the last cycle that had changes
    held_since: float | None = None  # monotonic: since when an open transaction holds the stream back
    holder: Blocker | None = None  # that transaction, once looked up (after HELD_BACK_LOG_AFTER)
    commit_to_publish: Histogram = field(default_factory=Histogram)

    def serving(self, core: Batcher) -> None:
        self.core = core
        self.lag, self.held_since, self.holder = 0.0, None, None

    def stopped(self) -> None:
        if self.core is not None:
            self.changes_before += self.core.changes_applied
            self.deltas_before += self.core.deltas_taken
        self.core = None
        self.held_since = self.holder = None

    @property
    def changes(self) -> int:
        return self.changes_before + (self.core.changes_applied if self.core else 0)

    @property
    def deltas(self) -> int:
        return self.deltas_before + (self.core.deltas_taken if self.core else 0)


class RelayCollector(Collector):
    """Reads a relay process's figures at scrape time; `partition` is the only label (GATEWAY_PARTITIONS bounds it).

    A partition's series are exported only while this process serves it: across relays, each partition's are
    exported once at any time. Counters resume from this process's earlier count if it serves the partition again.
    """

    def __init__(self, figures: dict[int, PartitionFigures], joint: JointReads | None = None) -> None:
        self.figures = figures
        self.joint = joint  # the process's joint reads, when it may serve several partitions

    def collect(self) -> Iterator[Metric]:
        active = [(p, f, f.core) for p, f in sorted(self.figures.items()) if f.core is not None]
        yield GaugeMetricFamily(
            "gateway_relay_active_partitions", "Partitions this relay process serves now", value=len(active)
        )
        yield from _gauges(active)
        yield from _counters(active)
        if self.joint is not None:
            yield CounterMetricFamily(
                "gateway_relay_joint_reads",
                "Statements that read several partitions' outbox at once",
                value=self.joint.statements,
            )
            yield CounterMetricFamily(
                "gateway_relay_joint_read_partitions",
                "The partitions' outbox reads that joint statements answered (each also in gateway_relay_outbox_reads_total)",
                value=self.joint.answered,
            )


Active = list[tuple[int, PartitionFigures, Batcher]]  # the partitions this process serves, by number


def _gauges(active: Active) -> Iterator[Metric]:
    """Each served partition's state now: its epoch, lag, what holds it back, its coalescing."""
    epoch = GaugeMetricFamily(
        "gateway_relay_epoch", "The partition's epoch, taken at this relay's takeover", labels=["partition"]
    )
    lag = GaugeMetricFamily(
        "gateway_relay_lag_seconds",
        "Commit to publish of the newest change, last cycle with changes",
        labels=["partition"],
    )
    # Which transaction (pid, xid) is in the relay's log: a label per blocker would be a new series each time.
    held = GaugeMetricFamily(
        "gateway_relay_held_back_seconds",
        "How long an open transaction has held the partition back",
        labels=["partition"],
    )
    # Only while held back: the holder's database (a small set) as a label, its pid as the value.
    holder_age = GaugeMetricFamily(
        "gateway_relay_holder_transaction_seconds",
        "How long the transaction holding the partition back has been open, by its database",
        labels=["partition", "database"],
    )
    holder_pid = GaugeMetricFamily(
        "gateway_relay_holder_pid",
        "The PostgreSQL backend (pid) of the transaction holding the partition back, by its database",
        labels=["partition", "database"],
    )
    ratio = GaugeMetricFamily(
        "gateway_relay_coalescing_ratio",
        "Changes per job delta published, since this process started",
        labels=["partition"],
    )
    # A team's history never all in memory (GATEWAY_RELAY_SUBMISSIONS_CACHED): those kept, and those read back.
    in_memory = GaugeMetricFamily(
        "gateway_relay_submissions_in_memory",
        "Submissions whose running totals the partition's relay holds in memory now",
        labels=["partition"],
    )
    restored = GaugeMetricFamily(
        "gateway_relay_submissions_restored",
        "Submissions set aside and read back from their saved rows since the partition's takeover",
        labels=["partition"],
    )
    now = time.monotonic()
    for p, f, core in active:
        in_memory.add_metric([str(p)], len(core.submissions.by_id))
        restored.add_metric([str(p)], core.submissions.restored)
        epoch.add_metric([str(p)], core.epoch)
        lag.add_metric([str(p)], f.lag)
        held.add_metric([str(p)], now - f.held_since if f.held_since is not None else 0.0)
        if f.holder is not None:
            holder_age.add_metric([str(p), f.holder.database], f.holder.age_seconds)
            holder_pid.add_metric([str(p), f.holder.database], f.holder.pid)
        ratio.add_metric([str(p)], f.changes / f.deltas if f.deltas else 0.0)
    yield from (epoch, lag, held, holder_age, holder_pid, ratio, in_memory, restored)


def _counters(active: Active) -> Iterator[Metric]:
    """Each served partition's counts since this process started: cycles, reads, changes, deltas, messages, latency."""
    changes = CounterMetricFamily("gateway_relay_changes", "Captured changes applied", labels=["partition"])
    deltas = CounterMetricFamily("gateway_relay_deltas", "Job deltas published after coalescing", labels=["partition"])
    published = CounterMetricFamily(
        "gateway_relay_published_messages", "Messages published on the bus", labels=["partition"]
    )
    latency = HistogramMetricFamily(
        "gateway_relay_commit_to_publish_seconds",
        "From a change's statement time in PostgreSQL to the relay's publish of it, per change",
        labels=["partition"],
    )
    cycles = CounterMetricFamily(
        "gateway_relay_cycles", "Publish cycles run (the relay's CPU grows with these)", labels=["partition"]
    )
    reads = CounterMetricFamily(
        "gateway_relay_outbox_reads",
        "Cycles that read the outbox (PostgreSQL's cost grows with these)",
        labels=["partition"],
    )
    for p, f, _ in active:
        cycles.add_metric([str(p)], f.cycles)
        reads.add_metric([str(p)], f.reads)
        changes.add_metric([str(p)], f.changes)
        deltas.add_metric([str(p)], f.deltas)
        published.add_metric([str(p)], f.published)
        latency.add_metric([str(p)], f.commit_to_publish.buckets(), f.commit_to_publish.sum)
    yield from (cycles, reads, changes, deltas, published, latency)


@dataclass
class Endpoint:
    """Where the relay serves /metrics, and the token scrapers send (GATEWAY_METRICS_TOKEN, as for nodes)."""

    port: int
    host: str = "127.0.0.1"
    token: str = ""


class Exporter:
    """A tiny HTTP server in the relay's event loop: /metrics and nothing else. `probe` reads Redis at each
    scrape (the relays' heartbeats, as nodes do), for `gateway_redis_up`."""

    def __init__(
        self, endpoint: Endpoint, collector: Collector, probe: Callable[[], Awaitable[object]] | None = None
    ) -> None:
        self.endpoint = endpoint
        self.collector = collector
        self.probe = probe
        self._server: Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def _metrics(self, request: Request) -> Response:
        refused = scraper_refused(request, self.endpoint.token)
        if refused is not None:
            return refused
        collectors = [self.collector]
        if self.probe is not None:
            try:
                await asyncio.wait_for(self.probe(), REDIS_WITHIN)
                answered = True
            except Exception:  # a scrape must answer even when Redis does not
                answered = False
            collectors.append(RedisUp(answered))
        return exposition(collectors)

    async def start(self) -> None:
        """Listen; a port that cannot be bound is logged and the relay goes on relaying without it (a standby on
        the same host, say): Prometheus shows the failed scrape."""
        host, port = self.endpoint.host, self.endpoint.port
        try:
            sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
        except OSError as exc:
            log.error("relay metrics: cannot listen on %s:%d (%s); serving none", host, port, exc)
            return
        app = Starlette(routes=[Route("/metrics", self._metrics)])
        # Without signal handlers of its own: the relay's (gateway.cli._run) stop the whole process.
        served = Served(app=app, health_limit=16, access_log=False, limits=HttpLimits(max_pending=16))
        self._server = Server(served, signals=False, graceful_shutdown=STOP_WITHIN / 2)
        self._task = asyncio.create_task(self._serve(self._server, sock), name="relay-metrics")
        log.info("relay metrics on http://%s:%d/metrics", host, port)

    @staticmethod
    async def _serve(server: Server, sock: socket.socket) -> None:
        await server.serve([sock])
        if not server.started:
            log.error("relay metrics: the server stopped")

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.stop()
        try:
            await asyncio.wait_for(self._task, STOP_WITHIN)  # past it, wait_for cancels the server's task
        except TimeoutError:
            log.warning("relay metrics: the server did not stop within %.0f s", STOP_WITHIN)
