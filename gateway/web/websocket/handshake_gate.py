"""What a websocket upgrade passes before any websocket work is done for it: a valid token, then the node's
admission at its user's share (gateway.core.admission).

The HTTP protocol asks here once an upgrade request's headers are complete (gateway.web.server.http11), before the
websocket protocol, ASGI or the app see it. An upgrade without a valid token (missing, forged, expired, a
session too old) is answered 401 here and spends nothing of the admission: a tokenless flood cannot take the
handshakes of those who can sign in. A signed one is admitted at most at its user's share of the rate; the app
then checks the rest (revocation, Origin, the per-user limit) as for every handshake.

Why the user and not the client's address: behind a load balancer every client has the balancer's address,
and a share per address would be a share for everyone.

A cluster's command feed comes with its key (`c<id>.<secret>`), which only the app can check against its stored
hash: such an upgrade is admitted here through an admission of the clusters' own (`CLUSTER_ADMISSION_RATE` a
second, each cluster at most a tenth of it), so a flood of made-up keys spends nothing of the people's and can
at worst slow clusters' reconnects, never people's.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from starlette.requests import cookie_parser

from ...core.admission import Admission
from ...credentials import InvalidToken, VerifiedTokens, cluster_of_key
from ..people.auth import TOKEN_COOKIE

Headers = list[tuple[bytes, bytes]]  # names in lower case, as the node's HTTP protocol keeps them


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str
    retry_after_ms: int | None = None


CLUSTER_ADMISSION_RATE = 50.0  # clusters' feeds a node takes a second: a farm's clusters back after a restart
CLUSTER_SHARE = 0.1


class HandshakeGate:
    def __init__(
        self, admission: Admission, tokens: VerifiedTokens, max_age: float, clusters: Admission | None = None
    ) -> None:
        self.admission = admission
        self.tokens = tokens
        self.max_age = max_age
        self.clusters = clusters or Admission(CLUSTER_ADMISSION_RATE, CLUSTER_SHARE)

    def check(self, headers: Headers, target: bytes, now: float, draw: float) -> Refusal | None:
        """None when the upgrade may go on to the app; `now` the monotonic clock, `draw` a uniform [0, 1)."""
        token = token_in(headers, target)
        if not token:
            return Refusal(401, "unauthorized", "missing token")
        cluster_id = cluster_of_key(token)
        if cluster_id is not None:  # its key is checked by the app; its admission is the clusters' own
            wait_ms = self.clusters.admit(now, draw, cluster_id)
            return None if wait_ms is None else Refusal(503, "busy", "too many feeds at once: retry shortly", wait_ms)
        try:
            user_id = self.tokens.read(token, self.max_age).user_id
        except InvalidToken as exc:
            return Refusal(401, "unauthorized", str(exc))
        wait_ms = self.admission.admit(now, draw, user_id)
        if wait_ms is not None:
            return Refusal(503, "busy", "too many new connections: retry shortly", wait_ms)
        return None


def token_in(headers: Headers, target: bytes) -> str | None:
    """The token the app reads (gateway.web.http.guards.token_of): the Authorization header's bearer token, then
    `?token=` (its name spelled exactly so), then the browser's cookie."""
    authorization = next((value for name, value in headers if name == b"authorization"), b"").decode("latin-1")
    if authorization.lower().startswith("bearer "):  # the first Authorization header, as Starlette's get reads
        return authorization[7:].strip()
    _, _, query = target.partition(b"?")
    for part in query.split(b"&"):
        name, sep, value = part.partition(b"=")
        if name == b"token" and sep:
            return unquote(value.decode("latin-1")) or None
    found: dict[str, str] = {}
    for name, value in headers:
        if name == b"cookie":
            found.update(cookie_parser(value.decode("latin-1")))
    return found.get(TOKEN_COOKIE)
