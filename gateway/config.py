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
    # No session lasts longer than this from its sign-in, renewed or not (seconds); then the user signs in again.
    session_max_age: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_SESSION_MAX_AGE", str(7 * 24 * 3600))))
    # HTTP API requests per second per user (token) and per cluster (key), in bursts up to `http_burst`; 0: no limit.
    http_rate: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_HTTP_RATE", "50")))
    http_burst: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_HTTP_BURST", "250")))
    # Scrapers of /metrics send it as a bearer token; unset, only loopback clients (not through a proxy) may scrape.
    metrics_token: str = field(default_factory=lambda: os.environ.get("GATEWAY_METRICS_TOKEN", ""))
    # Per-connection pending output before a resync, in bytes.
    max_pending_bytes: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_PENDING_BYTES", str(4 << 20))))
    # Seconds between keepalive pings; a connection that has not answered one by the next is closed (1011).
    keepalive: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_KEEPALIVE", "20")))
    max_subscriptions: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_SUBSCRIPTIONS", "100")))
    max_message_bytes: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_MESSAGE_BYTES", str(64 << 10))))
    max_connections_per_user: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_CONNECTIONS_PER_USER", "20")))
    # Client messages per second per connection (bursts up to four times as many).
    max_messages_per_second: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_MAX_MESSAGES_PER_SECOND", "50")))
    # New websockets admitted per second per node (bursts as large): a reconnect storm is let in at this
    # rate, the rest told to retry after a jittered delay.
    admission_rate: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_ADMISSION_RATE", "2000")))
    max_body_bytes: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_BODY_BYTES", str(8 << 20))))
    # What a request (or a websocket's upgrade request) may cost before the app sees it (gateway.web.http):
    # a longer URL gets 414, more or larger header lines 431, headers or a body not complete in time 408.
    max_request_line_bytes: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_REQUEST_LINE_BYTES", str(8 << 10))))
    max_header_bytes: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_HEADER_BYTES", str(64 << 10))))
    max_headers: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_HEADERS", "100")))
    # Seconds from the connection (or a kept-alive request's first byte) to the end of the headers, and from
    # there to the end of the body (an 8 MiB body then needs some 280 KB/s).
    header_timeout: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_HEADER_TIMEOUT", "10")))
    body_timeout: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_BODY_TIMEOUT", "30")))
    # Connections still waiting for their headers; past this a new connection gets 503 and is closed at once.
    max_pending_handshakes: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_PENDING_HANDSHAKES", "1000")))
    # Messages kept per channel for clients that resume from a cursor (>= 10 minutes at 20 a second).
    history_length: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_HISTORY_LENGTH", "12000")))
    # Outbox rows are deleted this long after the relay published them (takeovers replay from the outbox).
    outbox_retention: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_OUTBOX_RETENTION", "900")))
    # A job stays listed this long after its last change (database clock), then drops out.
    job_retention: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_RETENTION", str(24 * 3600))))
    # Seconds a trajectory must stay with no active job before its work counts as finished (toast and glow): an
    # upload that arrives in chunks closer together than this finishes once.
    finish_settle: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_FINISH_SETTLE", "0.5")))
    # How long an action waits for the clusters to confirm, in seconds.
    command_timeout: float = field(default_factory=lambda: float(os.environ.get("GATEWAY_COMMAND_TIMEOUT", "3")))
    # Actions in flight (waiting for their clusters) per user and per team, on one node; past them: 429.
    max_actions_per_user: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_ACTIONS_PER_USER", "4")))
    max_actions_per_team: int = field(default_factory=lambda: int(os.environ.get("GATEWAY_MAX_ACTIONS_PER_TEAM", "16")))
    # A single-user deployment shows no online count; local mode (the app in a browser tab or the desktop
    # app) shows no cluster metrics.
    single_user: bool = field(default_factory=lambda: os.environ.get("GATEWAY_SINGLE_USER", "") == "1")
    local: bool = field(default_factory=lambda: os.environ.get("GATEWAY_LOCAL", "") == "1")
    demo: bool = field(default_factory=lambda: os.environ.get("GATEWAY_DEMO", "") == "1")
