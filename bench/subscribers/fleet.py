"""The harness's side: a fleet of subscribers spread over worker processes, their figures and their states."""

from __future__ import annotations

import asyncio
import multiprocessing
import resource
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .counters import merge_stats
from .dialects import DIALECTS
from .worker import Spec, worker_main
from .wsclient import DEFLATE_OFFER

SPARE_FDS = 256  # a worker's descriptors besides its sockets: the pipe, the event loop, imports


def workers_needed(n: int, processes: int) -> int:
    """At least `processes`, and enough that each worker's share of the sockets fits its open-files limit
    (workers raise their soft limit to the hard one)."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    per_worker = max(1, (1 << 20 if hard == resource.RLIM_INFINITY else hard) - SPARE_FDS)
    return max(1, min(max(processes, -(-n // per_worker)), n)) if n else 1


@dataclass
class StateGroup:
    """Subscribers of one channel holding the same state."""

    state: Any  # {job_id: (version, status)}, or {status: count} for a gateway team channel (None: none yet)
    subscribers: int
    examples: list[int] = field(default_factory=list)  # some of their subscriber indices


@dataclass
class FleetStates:
    groups: dict[str, list[StateGroup]]  # channel -> distinct states, most common first
    not_live: dict[str, int]  # channel -> subscribers of it not live when asked


def compare_states(states: FleetStates, expected: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per channel of `expected`: subscribers holding exactly the expected state (`equal`) or not (`differ`),
    and for the most common wrong state how it differs (`missing`, `extra`, `wrong` job ids, a few each).
    `expected` has the same shape as the states: {job_id: (version, status)}, or {status: count}."""
    out: dict[str, dict[str, Any]] = {}
    for name, want in expected.items():
        groups = states.groups.get(name, [])
        equal = sum(g.subscribers for g in groups if g.state == want)
        bad = [g for g in groups if g.state != want]
        report: dict[str, Any] = {
            "subscribers": equal + sum(g.subscribers for g in bad),
            "equal": equal,
            "differ": sum(g.subscribers for g in bad),
            "not_live": states.not_live.get(name, 0),
        }
        if bad:
            worst = bad[0].state or {}
            want_d = want or {}
            report["missing"] = sorted(k for k in want_d if k not in worst)[:10]
            report["extra"] = sorted(k for k in worst if k not in want_d)[:10]
            report["wrong"] = [
                (k, worst[k], want_d[k]) for k in sorted(k for k in want_d if k in worst and worst[k] != want_d[k])
            ][:10]
            report["examples"] = bad[0].examples
        out[name] = report
    return out


def _per(value: Any, i: int) -> Any:
    return value(i) if callable(value) else value


def _header_lines(headers: Mapping[str, str] | None) -> list[str]:
    return [f"{k}: {v}" for k, v in (headers or {}).items()]


class Fleet:
    """`n` subscribers over `processes` worker processes (subscriber i lives in worker i % processes; more
    workers if a share would not fit one process's open-files limit).

    url:      ``ws://host:port/...`` for all, or ``url(i)`` per subscriber (e.g. a token per user); a list
              of URLs: the first, then the next one each time a connection attempt fails (a killed node)
    dialect:  "gateway", "gateway-msgpack", "plain" or "socketio"
    channels: the channels of every subscriber, or ``channels(i)``
    headers:  extra handshake headers (``{"Authorization": "Bearer ..."}``), or ``headers(i)``
    connect_rate: new connections a second over the whole fleet at start (None: all at once);
              reconnects are paced by backoff and by the delays the server asks for (503).
    deflate:  offer permessage-deflate, as browsers do (see the module's docstring).
    await_state: the peers' dialects are live once each channel's state has arrived (the peers send it at
              connect where the tap keeps it), not as soon as the handshake or the joins are done.

    Callables run in the parent only. Every method is a coroutine; one runs at a time.
    """

    def __init__(
        self,
        url: str | Callable[[int], str | list[str]],
        dialect: str,
        channels: Sequence[str] | Callable[[int], Sequence[str]],
        n: int,
        processes: int = 2,
        headers: Mapping[str, str] | Callable[[int], Mapping[str, str]] | None = None,
        connect_rate: float | None = None,
        handshake_timeout: float = 10.0,
        max_backoff: float = 5.0,
        deflate: bool = False,
        await_state: bool = False,
    ) -> None:
        if dialect not in DIALECTS:
            raise ValueError(f"unknown dialect {dialect!r}: one of {', '.join(DIALECTS)}")
        self.n = n
        self.dialect = dialect
        # The server's HTTP side (its /healthz and /metrics), when every subscriber dials the same one; the bench
        # points it at the gateway's GATEWAY_HEALTH_PORT.
        self.http_base: str | None = f"http://{urlsplit(url).netloc}" if isinstance(url, str) else None
        self.processes = workers_needed(n, processes)
        shares: list[list[tuple[int, str | list[str], list[str], list[str]]]] = [[] for _ in range(self.processes)]
        for i in range(n):
            address = _per(url, i)
            for one in [address] if isinstance(address, str) else address:
                if urlsplit(one).scheme not in ("ws", "http"):
                    raise ValueError(f"subscriber {i}: {one!r}: only ws:// (or http://) URLs")
            lines = _header_lines(_per(headers, i)) + ([DEFLATE_OFFER] if deflate else [])
            shares[i % self.processes].append((i, address, list(_per(channels, i)), lines))
        rate = connect_rate / self.processes if connect_rate else None
        self._specs = [Spec(dialect, share, rate, handshake_timeout, max_backoff, await_state) for share in shares]
        self._procs: list[Any] = []
        self._pipes: list[Any] = []
        self._lock: asyncio.Lock | None = None
        self.info: list[dict[str, Any]] = []  # per worker: pid, nofile

    @property
    def pids(self) -> list[int]:
        """The worker processes (for procstat: what the harness itself costs)."""
        return [p.pid for p in self._procs if p.pid is not None]

    async def __aenter__(self) -> Fleet:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Spawn the workers; each starts opening its connections at once. Returns when all are running."""
        ctx = multiprocessing.get_context("spawn")
        for spec in self._specs:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=worker_main, args=(child, spec), daemon=True, name="bench-subscribers")
            proc.start()
            child.close()
            self._procs.append(proc)
            self._pipes.append(parent)
        try:
            self.info = await asyncio.to_thread(self._receive_all)
        except RuntimeError:
            await asyncio.to_thread(self._join, True)
            raise

    async def wait_connected(self, timeout: float) -> dict[str, Any]:
        """Wait until every subscriber's handshake is done (or `timeout`): {subscribers, connected, live, ok, elapsed}."""
        return await self._wait("connected", timeout)

    async def wait_live(self, timeout: float) -> dict[str, Any]:
        """Wait until every subscriber is live (gateway: final snapshot pages and its pong): as wait_connected."""
        return await self._wait("live", timeout)

    async def reset_stats(self) -> None:
        """Zero every counter and histogram (the start of a measured phase). State and connections stay."""
        await self._call("reset")

    async def stats(self) -> dict[str, Any]:
        """Merged counters and gauges; ``latency_ms``/``summary_latency_ms`` summaries (p50, p99, max...);
        the raw Histograms as ``latency``/``summary_latency``; ``elapsed`` seconds since the last reset."""
        merged = merge_stats(await self._call("stats"))
        merged["latency_ms"] = merged["latency"].summary()
        merged["summary_latency_ms"] = merged["summary_latency"].summary()
        merged["elapsed"] = time.time() - merged.pop("since")
        return merged

    async def states(self) -> FleetStates:
        """Every subscriber's state, grouped per channel into distinct states with how many hold each
        (call it once the load has stopped and the stream settled); check with :func:`compare_states`."""
        merged: dict[str, list[StateGroup]] = {}
        not_live: dict[str, int] = {}
        for part in await self._call("states"):
            for name, k in part["not_live"].items():
                not_live[name] = not_live.get(name, 0) + k
            for name, found in part["groups"].items():
                groups = merged.setdefault(name, [])
                for state, k, examples in found:
                    for g in groups:
                        if g.state == state:
                            g.subscribers += k
                            g.examples = (g.examples + examples)[:5]
                            break
                    else:
                        groups.append(StateGroup(state, k, examples))
        for groups in merged.values():
            groups.sort(key=lambda g: -g.subscribers)
        return FleetStates(merged, not_live)

    async def positions(self, indices: list[int]) -> dict[int, dict[str, Any]]:
        """Gateway dialects: where subscribers `indices` stand (their node, each channel's cursor), to say
        what a subscriber whose state differs from the database held."""
        out: dict[int, dict[str, Any]] = {}
        for part in await self._call("positions", indices):
            out.update(part)
        return out

    async def storm(self, timeout: float = 60.0) -> dict[str, Any]:
        """Drop every connection abruptly and reconnect them all at once (gateway: with their cursors).
        ``recovery_s``: from the first drop until every subscriber was live again (None past `timeout`);
        ``dropped_at``: the first drop (time.time()); ``http_503``, ``resyncs``, ``snapshot_pages``, ``connects``,
        ``failed_connects``, ``gaps`` during it."""
        parts = await self._call("storm", timeout)
        out = merge_stats({k: v for k, v in p.items() if k not in ("abort_at", "live_at")} for p in parts)
        done = [p["live_at"] for p in parts]
        start = min(p["abort_at"] for p in parts)
        out["recovery_s"] = max(done) - start if all(t is not None for t in done) else None
        out["dropped_at"] = start  # time.time()
        return out

    async def home(self, timeout: float = 60.0) -> int:
        """Subscribers on another node than their first (a fault moved them) go back, with their cursors, so that
        the next phase finds them spread as at the start; how many moved."""
        return sum(await self._call("home", timeout))

    async def until(self, marks: dict[str, tuple[str, Any, int]], timeout: float = 60.0) -> float | None:
        """Gateway dialects: when (time.time()) every subscriber held the marks of its channels (see
        GatewayDialect.shows), e.g. a change committed just after a fault; None if some did not within `timeout`."""
        done = await self._call("until", marks, timeout)
        return None if any(t is None for t in done) else max(done)

    async def stop(self) -> None:
        """Close every connection (close frame 1000) and end the workers."""
        if not self._procs:
            return
        try:
            await self._call("stop")
        except (RuntimeError, OSError):
            pass
        await asyncio.to_thread(self._join)

    # -- plumbing

    def _join(self, kill: bool = False) -> None:
        for proc in self._procs:
            if kill:
                proc.terminate()
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
        for pipe in self._pipes:
            pipe.close()
        self._procs, self._pipes = [], []

    async def _wait(self, what: str, timeout: float) -> dict[str, Any]:
        start = time.monotonic()
        merged = merge_stats(await self._call("wait", what, timeout))
        merged["ok"] = merged[what] == self.n
        merged["elapsed"] = time.monotonic() - start
        return merged

    async def _call(self, *message: Any) -> list[Any]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await asyncio.to_thread(self._roundtrip, message)

    def _roundtrip(self, message: tuple) -> list[Any]:
        if not self._pipes:
            raise RuntimeError("the fleet is not running")
        for pipe in self._pipes:
            pipe.send(message)
        return self._receive_all()

    def _receive_all(self) -> list[Any]:
        out = []
        for proc, pipe in zip(self._procs, self._pipes):
            try:
                kind, payload = pipe.recv()
            except EOFError:
                raise RuntimeError(f"subscriber worker {proc.pid} died (exit code {proc.exitcode})") from None
            if kind == "err":
                raise RuntimeError(payload)
            out.append(payload)
        return out
