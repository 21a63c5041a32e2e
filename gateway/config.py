"""Settings from the environment; command-line flags override them."""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def _origins() -> tuple[str, ...]:
    raw = os.environ.get("GATEWAY_ORIGINS", "")
    return tuple(o.strip().rstrip("/") for o in raw.split(",") if o.strip())


@dataclass
class Settings:
    database_url: str = field(default_factory=lambda: os.environ.get("DATABASE_URL", ""))
    redis_url: str = field(default_factory=lambda: os.environ.get("REDIS_URL", ""))
    # REDIS_URL names one node of a Redis Cluster (7+ or Valkey): sharded pub/sub, a connection per shard.
    redis_cluster: bool = field(default_factory=lambda: os.environ.get("GATEWAY_REDIS_CLUSTER", "") == "1")
    # Teams are split over this many partitions, each published by one active relay (any number of relay
    # processes share them out). Every relay and node must agree on it: change it only with all stopped.
    partitions: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_PARTITIONS", "1")))
    # Signs user tokens. Without one, `serve` refuses to start (the demo makes one up).
    secret: str = field(default_factory=lambda: os.environ.get("GATEWAY_SECRET", ""))
    # Allowed browser origins for the websocket; empty means same origin only.
    origins: tuple[str, ...] = field(default_factory=_origins)
    token_ttl: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_TOKEN_TTL", str(12 * 3600))))
    # Per-connection pending output before a resync, in bytes.
    max_pending_bytes: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_PENDING_BYTES", str(4 << 20))))
    max_subscriptions: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_SUBSCRIPTIONS", "100")))
    max_message_bytes: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_MESSAGE_BYTES", str(64 << 10))))
    max_connections_per_user: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_CONNECTIONS_PER_USER", "20")))
    # Client messages per second per connection (bursts up to four times as many).
    max_messages_per_second: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_MAX_MESSAGES_PER_SECOND", "50")))
    # New websockets admitted per second per node (bursts as large): a reconnect storm is let in at this
    # rate, the rest told to retry after a jittered delay.
    admission_rate: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_ADMISSION_RATE", "2000")))
    max_body_bytes: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_BODY_BYTES", str(8 << 20))))
    # Messages kept per channel for clients that resume from a cursor (>= 10 minutes at 20 a second).
    history_length: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_HISTORY_LENGTH", "12000")))
    # Outbox rows are deleted this long after the relay published them (takeovers replay from the outbox).
    outbox_retention: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_OUTBOX_RETENTION", "900")))
    # A job stays listed this long after its last change (database clock), then drops out.
    job_retention: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_RETENTION", str(24 * 3600))))
    # How long an action waits for the clusters to confirm, in seconds.
    command_timeout: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_COMMAND_TIMEOUT", "3")))
    # A single-user deployment shows no online count; local mode (the app in a browser tab or the desktop
    # app) shows no cluster metrics.
    single_user: bool = field(default_factory=lambda: os.environ.get("GATEWAY_SINGLE_USER", "") == "1")
    local: bool = field(default_factory=lambda: os.environ.get("GATEWAY_LOCAL", "") == "1")
    demo: bool = field(default_factory=lambda: os.environ.get("GATEWAY_DEMO", "") == "1")
