"""Serving Prometheus text, for a node's /metrics and the relay's: who may scrape, and what every process adds.

With GATEWAY_METRICS_TOKEN set, scrapers send it as a bearer token; without, only a client on the process's
own host may scrape, directly (a request a proxy forwards could come from anywhere), naming this host (a
browser on this machine showing a rebinding domain's page connects from loopback too).
"""

from __future__ import annotations

import hmac
import ipaddress

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .web.hosts import loopback_host

# process_* (CPU, memory, descriptors, start time) and python_info: made once, read at each scrape.
PROCESS_COLLECTORS: tuple[Collector, ...] = (ProcessCollector(registry=None), PlatformCollector(registry=None))
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def exposition(collectors: list[Collector]) -> Response:
    """The collectors' figures read now, with the process's own: a registry per scrape, nothing global."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in (*PROCESS_COLLECTORS, *collectors):
        registry.register(collector)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE)


def scraper_refused(request: Request, token: str) -> JSONResponse | None:
    """Why this caller may not read /metrics (None: it may)."""
    if token:
        auth = request.headers.get("authorization", "")
        given = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        if hmac.compare_digest(given.encode(), token.encode()):
            return None
        return JSONResponse(
            {"error": "unauthorized", "message": "/metrics needs GATEWAY_METRICS_TOKEN as a bearer token"},
            401,
            headers={"WWW-Authenticate": "Bearer"},
        )
    forwarded = "x-forwarded-for" in request.headers or "forwarded" in request.headers
    # A loopback client is a scraper on this machine only when it also names this machine: a browser here on a
    # rebinding domain's page connects from loopback too, naming that domain (gateway.web.hosts).
    if (
        not forwarded
        and request.client is not None
        and _loopback(request.client.host)
        and loopback_host(request.headers.get("host", ""))
    ):
        return None
    return JSONResponse(
        {"error": "forbidden", "message": "/metrics is served to this host only: set GATEWAY_METRICS_TOKEN"}, 403
    )


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
