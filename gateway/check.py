"""`gateway check`: the configuration as `serve` and `relay` would read it, judged before anything starts.

Each check gives one line: `ok`, `warning` (worth knowing, the status stays) or `problem` (wrong, or risky
enough to fix before going live). The exit status
is 0 when there is no problem; 5 when PostgreSQL or Redis cannot be reached; 2 otherwise (README's table).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from . import exits
from .bus import urls as redis_urls
from .config import DEFAULT_HOSTS, MIN_SECRET_LENGTH, Settings

LOOPBACK = ("127.0.0.1", "localhost", "::1")
HELD_OPEN_WARN_AFTER = 5.0  # seconds a transaction in another database may stay open before `check` warns


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    status: int = exits.OK

    def ok(self, what: str) -> None:
        self.lines.append(f"ok       {what}")

    def warning(self, what: str) -> None:
        """Worth knowing, not a reason to stop: the exit status stays."""
        self.lines.append(f"warning  {what}")

    def problem(self, what: str, status: int = exits.USAGE) -> None:
        self.lines.append(f"problem  {what}")
        if self.status != exits.UNREACHABLE:
            self.status = status


def check(settings: Settings, host: str, lb_idle_timeout: float | None) -> Report:
    """`settings` as the CLI read them (a setting that does not parse stopped it already, with exit 2)."""
    report = Report()
    _settings(settings, host, lb_idle_timeout, report)
    if settings.database_url:
        asyncio.run(_postgres(settings, report))
    if settings.redis_url:
        asyncio.run(_redis(settings, report))
    return report


def _settings(settings: Settings, host: str, lb_idle_timeout: float | None, report: Report) -> None:
    for name, value in (("DATABASE_URL", settings.database_url), ("REDIS_URL", settings.redis_url)):
        if value:
            report.ok(f"{name} is set")
        else:
            report.problem(f"{name} is not set")
    sentinels = redis_urls.parse(settings.redis_url) if settings.redis_url else None
    if sentinels is not None:
        report.ok(
            f"REDIS_URL: the primary of {sentinels.service!r}, as {len(sentinels.hosts)} sentinel(s) name it"
            + ("" if len(sentinels.hosts) > 1 else " (one sentinel: when it is down, no client finds the primary)")
        )
    if not settings.secret:
        report.problem("GATEWAY_SECRET is not set: it signs every user token")
    elif len(settings.secret) < MIN_SECRET_LENGTH:
        report.problem(f"GATEWAY_SECRET has {len(settings.secret)} characters: at least {MIN_SECRET_LENGTH}")
    else:
        report.ok("GATEWAY_SECRET is long enough")
    if "*" in settings.origins:
        report.problem("GATEWAY_ORIGINS=*: a page on any site may open the socket and act with a visitor's cookie")
    if "*" in settings.hosts:
        report.ok("GATEWAY_HOSTS=*: every host name is answered (a proxy in front must check them)")
    elif host not in LOOPBACK and settings.hosts == DEFAULT_HOSTS:
        report.problem(
            f"GATEWAY_HOSTS is not set, yet the node listens on {host}: requests naming any host but"
            f" {', '.join(DEFAULT_HOSTS)} get 421"
        )
    else:
        report.ok(f"GATEWAY_HOSTS: {', '.join(settings.hosts)}")
    if lb_idle_timeout is not None:
        if settings.keepalive >= lb_idle_timeout:
            report.problem(
                f"GATEWAY_KEEPALIVE ({settings.keepalive:g} s) is not below the load balancer's idle timeout"
                f" ({lb_idle_timeout:g} s): it closes idle websockets before a ping keeps them open"
            )
        else:
            report.ok(f"GATEWAY_KEEPALIVE ({settings.keepalive:g} s) is below the load balancer's idle timeout")


async def _postgres(settings: Settings, report: Report) -> None:
    from .store.errors import STORE_UNAVAILABLE
    from .store.migrate import state

    try:
        found = await asyncio.wait_for(state(settings.database_url), 15)
    except STORE_UNAVAILABLE as exc:
        report.problem(f"PostgreSQL: cannot reach it: {type(exc).__name__}: {exc}", exits.UNREACHABLE)
        return
    report.ok("PostgreSQL answers")
    if found.pending:
        report.problem(f"migrations not applied: {', '.join(found.pending)} (run `gateway migrate`)")
    if found.edited:
        report.problem(f"migrations edited after they were applied: {', '.join(found.edited)}")
    if not found.pending and not found.edited:
        report.ok("every migration the package ships is applied, as shipped")
    await _held_open_elsewhere(settings, report)


async def _held_open_elsewhere(settings: Settings, report: Report) -> None:
    """PostgreSQL's horizon is the server's: a transaction left open in another database holds every relay back."""
    from .store.outbox import held_open_elsewhere

    found = await asyncio.wait_for(held_open_elsewhere(settings.database_url, HELD_OPEN_WARN_AFTER), 15)
    for held in found:
        report.warning(
            f"PostgreSQL: a transaction in database {held.database!r} (pid {held.pid}) has been open"
            f" {held.age_seconds:.0f} s; while it stays open no relay publishes anything committed after it"
            " began: give the gateway a server of its own, or watch gateway_relay_held_back_seconds"
        )
    if not found:
        report.ok(f"PostgreSQL: no other database holds a transaction open longer than {HELD_OPEN_WARN_AFTER:g} s")


async def _redis(settings: Settings, report: Report) -> None:
    from .bus import probe
    from .bus.errors import BusUnavailable

    url, cluster = settings.redis_url, settings.redis_cluster
    try:
        await probe.ping(url, cluster)
        report.ok("Redis answers")
        config = await probe.memory_settings(url, cluster)
    except BusUnavailable as exc:
        report.problem(f"Redis: cannot reach it: {exc}", exits.UNREACHABLE)
        return
    if config is None:  # managed Redis often refuses CONFIG
        report.ok("Redis refuses CONFIG GET: check by hand that maxmemory is set with maxmemory-policy noeviction")
    elif int(config.get("maxmemory", "0") or 0) == 0:
        report.problem("Redis runs without maxmemory: a flood of writes can take the machine's memory")
    elif config.get("maxmemory-policy") != "noeviction":
        report.problem(
            f"Redis evicts keys (maxmemory-policy {config.get('maxmemory-policy')}): it would drop channel"
            " histories and the relays' state silently; use noeviction"
        )
    else:
        report.ok("Redis has maxmemory, and noeviction")
