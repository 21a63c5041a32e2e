"""Run the relays: a relay process serves the partitions it holds, each in a loop over core, store and bus.

Teams are split over partitions (`GATEWAY_PARTITIONS`, one by default). Each partition has one active relay
at a time, the holder of its advisory lock. With one partition, one relay process is active and the others
stand by on the lock. With several, the live relay processes share them out (gateway.relay.ownership).

The parts: `ownership` (locks, standing by, sharing), `partition` (a takeover and its loop), `cycle` (read,
fold, then carry out the publish machine of gateway.core.publish_cycle), `pacing` (when to read again),
`maintenance` (heartbeat, held-back watch, pruning, sweeps).
"""

from __future__ import annotations

from .. import tracing
from ..bus.broker import Broker, RedisBroker
from ..bus.publisher import HISTORY_BYTES
from ..config import Settings
from ..core.finish import SETTLE
from ..core.submission_rows import CACHED
from ..store.joint_reads import JointReads
from .metrics import Endpoint, Exporter, PartitionFigures, RelayCollector
from .ownership import PartitionServer, Sharing
from .pacing import Pace
from .partition import PartitionRelay, PartitionSettings
from .retry import STEP_DOWN_AFTER, Patience


class Relay:
    """One relay process: serves the partitions it holds."""

    def __init__(
        self,
        database_url: str,
        redis_url: str,
        history_length: int = 12_000,
        history_ttl: int = 3600,
        history_bytes: int = HISTORY_BYTES,
        retention: float = 900.0,
        job_retention: float = 24 * 3600.0,
        presence: bool = True,
        metrics: bool = True,
        cluster: bool = False,
        partitions: int = 1,
        finish_settle: float = SETTLE,
        metrics_endpoint: Endpoint | None = None,
        cluster_silent_after: float = 120.0,
        activity_days: float = 90.0,
        step_down_after: float | None = STEP_DOWN_AFTER,
        submissions_cached: int = CACHED,
    ) -> None:
        self.database_url = database_url
        self.redis_url = redis_url
        self.history_length = history_length
        self.history_ttl = history_ttl
        self.history_bytes = history_bytes
        self.retention = retention  # outbox rows are kept this long after they were published
        self.job_retention = job_retention  # a job is listed this long after its last change
        self.presence = presence
        self.metrics = metrics
        self.cluster = cluster
        self.count = partitions
        self.finish_settle = finish_settle  # seconds with no active job before a trajectory's work counts as finished
        self.cluster_silent_after = cluster_silent_after  # seconds without a request before a cluster is silent
        self.activity_days = activity_days  # who did what is kept this many days
        self.submissions_cached = submissions_cached  # kept in memory besides those in use
        # Redis not answering for this long, the active relay stands by for one that may reach it (None: never).
        self.patience = Patience(step_down_after)
        self.serving: dict[int, PartitionServer] = {}  # with several partitions: what this process serves
        self.figures: dict[int, PartitionFigures] = {}  # per partition this process has served: its /metrics
        self.metrics_endpoint = metrics_endpoint  # None: no endpoint of its own (the demo's node exports them)
        # Several partitions: their busy relays read the outbox in one statement (gateway.store.joint_reads).
        self.joint = JointReads(database_url, partitions) if partitions > 1 else None
        self.pace = Pace() if partitions > 1 else None  # and they poll while the process is busy

    @classmethod
    def from_settings(cls, settings: Settings, metrics_endpoint: Endpoint | None = None) -> Relay:
        """The relay `gateway relay` and `gateway demo` run, as the environment configures it."""
        tracing.configure()  # OTEL_EXPORTER_OTLP_ENDPOINT set: spans of the cycles that publish traced changes
        return cls(
            settings.database_url,
            settings.redis_url,
            history_length=settings.history_length,
            history_bytes=settings.history_bytes,
            retention=settings.outbox_retention,
            job_retention=settings.job_retention,
            presence=not settings.single_user,
            metrics=not settings.local,
            cluster=settings.redis_cluster,
            partitions=settings.partitions,
            finish_settle=settings.finish_settle,
            metrics_endpoint=metrics_endpoint,
            cluster_silent_after=settings.cluster_silent_after,
            activity_days=settings.activity_days,
            step_down_after=settings.relay_step_down_after or None,
            submissions_cached=settings.relay_submissions_cached,
        )

    def partition_settings(self) -> PartitionSettings:
        """What each of its partitions' relays needs of the process."""
        return PartitionSettings(
            database_url=self.database_url,
            history_length=self.history_length,
            history_ttl=self.history_ttl,
            history_bytes=self.history_bytes,
            retention=self.retention,
            job_retention=self.job_retention,
            cluster_silent_after=self.cluster_silent_after,
            activity_days=self.activity_days,
            finish_settle=self.finish_settle,
            submissions_cached=self.submissions_cached,
            presence=self.presence,
            metrics=self.metrics,
            patience=self.patience,
            joint=self.joint,
            pace=self.pace,
        )

    def partition_relay(self, settings: PartitionSettings, broker: Broker, partition: int) -> PartitionRelay:
        """The relay of one partition, its figures in this process's /metrics."""
        return PartitionRelay(settings, broker, partition, self.figures.setdefault(partition, PartitionFigures()))

    async def run(self) -> None:
        broker = RedisBroker.connect(self.redis_url, self.cluster, self.count)
        settings = self.partition_settings()
        exporter = (
            Exporter(
                self.metrics_endpoint,
                RelayCollector(self.figures, self.joint),
                probe=lambda: broker.relay_stats.read(broker.partitions.tags),
            )
            if self.metrics_endpoint
            else None
        )
        try:
            if exporter is not None:
                await exporter.start()
            if self.count == 1:
                await self.partition_relay(settings, broker, 0).run()
            else:
                if self.joint is not None:
                    self.joint.warm()
                await Sharing(
                    self.database_url, self.count, lambda p: self.partition_relay(settings, broker, p), self.serving
                ).run()
        finally:
            if exporter is not None:
                await exporter.stop()
            if self.joint is not None:
                await self.joint.close()
            await broker.aclose()
