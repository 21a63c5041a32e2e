"""What a running web process holds: settings, the PostgreSQL pool, the broker, and the node's hub."""

from __future__ import annotations

from dataclasses import dataclass

from ..bus.broker import Broker
from ..config import Settings
from ..control.commands import Dispatch
from ..core.admission import Admission
from ..core.ratelimit import KeyedRate
from ..credentials import VerifiedTokens
from ..hub.node import Node
from ..hub.revocations import SessionRevocations
from ..hub.sessions import SessionsSeen
from ..hub.user_sockets import SocketsHeld
from ..store.types import Pool
from .cluster.heard import Hearing
from .cluster.quotas import Creations
from .http.heavy import HeavyReads
from .http.hosts import same_origin
from .http.inflight import ActionLimits
from .node.garbage import CollectorPauses, MemoryReturn
from .node.loop_lag import LoopLag


@dataclass
class Runtime:
    settings: Settings
    pool: Pool
    broker: Broker  # cluster commands too: `broker.commands`
    node: Node
    actions: ActionLimits
    heavy: HeavyReads  # searches, deep pages and exports in flight, per user and per node
    admission: Admission | None = None  # new websockets (the HTTP protocol asks it: gateway.web.serving)
    loop_lag: LoopLag | None = None  # how late the event loop runs (admission follows it; /metrics)
    collector: CollectorPauses | None = None  # the cyclic garbage collector's passes, timed (/metrics)
    memory: MemoryReturn | None = None  # freed memory given back to the system after many connections left
    revocations: SessionRevocations | None = None  # every session's token is checked against it
    http_rate: KeyedRate | None = None  # per user and per cluster (GATEWAY_HTTP_RATE)
    sessions: SessionsSeen | None = None  # where each session was last seen (the account page)
    hearing: Hearing | None = None  # notes when each cluster was last heard from
    tokens: VerifiedTokens | None = None  # tokens verified already (a reconnect storm verifies each once)
    creations: Creations | None = None  # rows each team's clusters may create an hour (GATEWAY_MAX_NEW_*)
    sockets_held: SocketsHeld | None = None  # the per-user socket limit across workers and nodes (in the bus)

    @property
    def dispatch(self) -> Dispatch:
        """How this process sends commands to clusters (gateway.control.commands)."""
        s = self.settings
        return Dispatch(self.pool, self.broker.commands, s.command_timeout, s.command_expiry)

    def origin_allowed(self, origin: str, scheme: str, host: str) -> bool:
        """The request's own origin (scheme, host and port), or one listed in GATEWAY_ORIGINS."""
        allowed = self.settings.origins
        if origin.rstrip("/") in allowed or "*" in allowed:
            return True
        return same_origin(origin, scheme, host)
