"""Serving Prometheus text, for a node's /metrics and the relay's: who may scrape, and what every process adds
(its `process_*` figures, `python_info` and `gateway_build_info`).

With GATEWAY_METRICS_TOKEN set, scrapers send it as a bearer token; without, only a client on the process's
own host may scrape, directly (a request a proxy forwards could come from anywhere), naming this host (a
browser on this machine showing a rebinding domain's page connects from loopback too).
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import os
import platform
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from . import __version__
from .core.hosts import loopback_host

REDIS_WITHIN = 1.0  # seconds a scrape waits for Redis before it reports it down (and answers all the same)
COMMIT_ENV = "GATEWAY_COMMIT"  # set by whoever builds an image or package from a commit
_COMMIT = re.compile(r"[0-9A-Za-z._-]{1,64}")


@functools.cache
def commit() -> str:
    """The commit this code comes from: GATEWAY_COMMIT, else HEAD when running from a git checkout (asked once),
    else "unknown". Never fails: an installed package has no checkout, a host may have no git."""
    given = os.environ.get(COMMIT_ENV, "").strip()
    if given:
        return given if _COMMIT.fullmatch(given) else "unknown"
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():  # a directory in a clone, a file in a worktree
        return "unknown"
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    found = head.stdout.strip()
    return found if head.returncode == 0 and _COMMIT.fullmatch(found) else "unknown"


class BuildInfo(Collector):
    """`gateway_build_info{version,python,commit} 1`, on nodes and relays alike: which build answers."""

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "gateway_build_info", "The gateway's version, Python and commit", labels=["version", "python", "commit"]
        )
        info.add_metric([__version__, platform.python_version(), commit()], 1)
        yield info


class RedisUp(Collector):
    """`gateway_redis_up`: whether Redis answered the process's read at this scrape, within REDIS_WITHIN."""

    def __init__(self, answered: bool) -> None:
        self.answered = answered

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "gateway_redis_up",
            f"Whether Redis answered this scrape's read within {REDIS_WITHIN:g} s (1) or not (0)",
            value=1 if self.answered else 0,
        )


# process_* (CPU, memory, descriptors, start time), python_info and gateway_build_info: made once, read at each
# scrape.
PROCESS_COLLECTORS: tuple[Collector, ...] = (
    ProcessCollector(registry=None),
    PlatformCollector(registry=None),
    BuildInfo(),
)
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
    # rebinding domain's page connects from loopback too, naming that domain (gateway.core.hosts).
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
