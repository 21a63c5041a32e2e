"""A node's requests by route template, method and status class: `gateway_http_requests_total` and
`gateway_http_request_duration_seconds` (gateway.web.node.logs.RequestTimer observes them).

Every label has few values, whatever clients send: the route is the template the request matched
(`/api/teams/{id}/members`, the frontend's files `/{path}`), `other` when none did (a path nobody serves, a
host refused before routing); the method is one of HTTP's usual ones or `other`; the status is its class
(`2xx`). A websocket counts once, at its handshake's answer: `1xx` when accepted (101), else the refusal's.

`gateway_http_clients_gone_total` counts the requests whose client left before their answer was complete (a page
closed mid-download, a reader cut at GATEWAY_SEND_STALL_SECONDS): the socket layer notes them (`client_gone`), and
nothing of them is logged as an error.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import Mount
from starlette.types import Scope

from ...core.histogram import Histogram

OTHER = "other"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Seconds: from a static file or /healthz (well under a millisecond) to an action waiting on its clusters.
DURATION_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_CONVERTOR = re.compile(r"\{(\w+):\w+\}")  # `{id:int}` reads `{id}`

Key = tuple[str, str, str]  # route, method, status class


def route_label(scope: Scope) -> str:
    """The template of the route the request matched (Starlette notes it in the scope), else `other`."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if not isinstance(path, str):
        return OTHER
    if isinstance(route, Mount):
        return f"{path}/{{path}}"
    return _template(path)


@functools.lru_cache(maxsize=1024)
def _template(path: str) -> str:
    """A route's path as its label (the app's few routes: each spelled out once, not at every request)."""
    return _CONVERTOR.sub(r"{\1}", path) or "/"


def method_label(scope: Scope) -> str:
    method = scope.get("method", "GET")  # a websocket's scope has none: its handshake is a GET
    return method if method in METHODS else OTHER


def status_class(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status <= 599 else OTHER


class HttpFigures(Collector):
    """Counts and durations per (route, method, status class), one event loop's: no lock."""

    def __init__(self) -> None:
        self.requests: dict[Key, Histogram] = {}
        self.gone = 0

    def client_gone(self) -> None:
        self.gone += 1

    def observe(self, scope: Scope, status: int, seconds: float) -> None:
        key = (route_label(scope), method_label(scope), status_class(status))
        durations = self.requests.get(key)
        if durations is None:
            durations = self.requests[key] = Histogram(DURATION_BOUNDS)
        durations.observe(seconds)

    def collect(self) -> Iterator[Metric]:
        labels = ["route", "method", "status"]
        total = CounterMetricFamily(
            "gateway_http_requests", "HTTP requests and websocket handshakes answered", labels=labels
        )
        duration = HistogramMetricFamily(
            "gateway_http_request_duration_seconds",
            "From a request reaching the app to its response's end (a websocket: to its handshake's answer)",
            labels=labels,
        )
        for key, durations in sorted(self.requests.items()):
            total.add_metric(list(key), durations.count)
            duration.add_metric(list(key), durations.buckets(), durations.sum)
        yield total
        yield duration
        yield CounterMetricFamily(
            "gateway_http_clients_gone",
            "HTTP requests whose client left (or was cut for taking nothing) before their answer was complete",
            value=self.gone,
        )
