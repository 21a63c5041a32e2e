"""A worker process of the fleet: its share of the subscribers on one uvloop, driven over a Pipe by the parent."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import time
import traceback
from dataclasses import dataclass
from typing import Any, cast

from .counters import Stats
from .dialects import Resuming
from .jobstate import unpack_jobs
from .subscriber import Subscriber


@dataclass
class Spec:
    dialect: str
    subscribers: list[tuple[int, str | list[str], list[str], list[str]]]  # (index, url(s), channels, header lines)
    connect_rate: float | None  # connections a second for this worker; None: all at once
    handshake_timeout: float
    max_backoff: float
    await_state: bool = False  # a peer's subscriber is live once each channel's state has arrived


def raise_nofile() -> int:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    except (ValueError, OSError):
        return soft


class Worker:
    def __init__(self, pipe: Any, spec: Spec, loop: asyncio.AbstractEventLoop) -> None:
        self.pipe = pipe
        self.loop = loop
        self.stats = Stats()
        self.stopping = False
        self.handshake_timeout = spec.handshake_timeout
        self.max_backoff = spec.max_backoff
        self.connect_rate = spec.connect_rate
        self.subs = [
            Subscriber(self, idx, url, channels, headers, spec.dialect, self.stats, spec.await_state)
            for idx, url, channels, headers in spec.subscribers
        ]
        self.n = len(self.subs)
        self.connected = 0
        self.live = 0
        self.all_live_at: float | None = None
        self.all_connected = asyncio.Event()
        self.all_live = asyncio.Event()
        if not self.n:
            self.all_connected.set()
            self.all_live.set()
        self.tasks: set[asyncio.Task] = set()
        self.done = loop.create_future()

    def spawn(self, coro: Any) -> None:
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def connected_changed(self, up: bool) -> None:
        self.connected += 1 if up else -1
        if self.connected == self.n:
            self.all_connected.set()
        elif not up:
            self.all_connected.clear()

    def live_changed(self, up: bool) -> None:
        self.live += 1 if up else -1
        if self.live == self.n:
            self.all_live_at = time.time()
            self.all_live.set()
        elif not up:
            self.all_live.clear()

    def gauges(self) -> dict[str, int]:
        return {"subscribers": self.n, "connected": self.connected, "live": self.live}

    async def open_all(self) -> None:
        rate = self.connect_rate
        interval = 1.0 / rate if rate else 0.0
        start = time.monotonic()
        for i, sub in enumerate(self.subs):
            if self.stopping:
                return
            sub.connect()
            if interval:
                delay = start + (i + 1) * interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
            elif i % 200 == 199:
                await asyncio.sleep(0)

    # -- the pipe

    def on_pipe(self) -> None:
        try:
            message = self.pipe.recv()
        except (EOFError, OSError):  # the parent is gone
            self.loop.remove_reader(self.pipe.fileno())
            self.finish()
            return
        self.spawn(self.handle(message))

    async def handle(self, message: tuple) -> None:
        command, *args = message
        try:
            result = await getattr(self, "cmd_" + command)(*args)
            reply: tuple = ("ok", result)
        except Exception:
            reply = ("err", f"worker {os.getpid()}: {traceback.format_exc()}")
        try:
            os.set_blocking(self.pipe.fileno(), True)  # a big reply (a 40,000-job state) must go out whole
            self.pipe.send(reply)
        except (OSError, EOFError):
            self.finish()
            return
        if command == "stop":
            self.finish()

    def finish(self) -> None:
        self.stopping = True
        if not self.done.done():
            self.done.set_result(None)

    # -- commands

    async def cmd_wait(self, what: str, timeout: float) -> dict[str, Any]:
        event = self.all_live if what == "live" else self.all_connected
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        return self.gauges()

    async def cmd_reset(self) -> None:
        self.stats.reset()

    async def cmd_stats(self) -> dict[str, Any]:
        return {**self.stats.export(), **self.gauges()}

    async def cmd_states(self) -> dict[str, Any]:
        groups: dict[str, list[list]] = {}
        not_live: dict[str, int] = {}
        for sub in self.subs:
            live = sub.live
            for name, state in sub.dialect.raw_states().items():
                if not live:
                    not_live[name] = not_live.get(name, 0) + 1
                found = groups.get(name)
                if found is None:
                    groups[name] = [[state, 1, [sub.idx]]]
                    continue
                for g in found:
                    if g[0] == state:
                        g[1] += 1
                        if len(g[2]) < 5:
                            g[2].append(sub.idx)
                        break
                else:
                    found.append([state, 1, [sub.idx]])
        out = {}
        for name, found in groups.items():
            # A gateway team channel's state is its counts (status -> n); every other state is packed jobs.
            out[name] = [
                (None if s is None else dict(s) if any(isinstance(key, str) for key in s) else unpack_jobs(s), k, ex)
                for s, k, ex in found
            ]
        return {"groups": out, "not_live": not_live}

    async def cmd_positions(self, indices: list[int]) -> dict[int, dict[str, Any]]:
        """Where these subscribers (those of this worker) stand: the node they are on, each channel's cursor."""
        wanted = set(indices)
        return {
            sub.idx: {"node": f"{sub.host}:{sub.port}", "live": sub.live, "cursors": sub.dialect.cursors()}
            for sub in self.subs
            if sub.idx in wanted and isinstance(sub.dialect, Resuming)
        }

    async def cmd_storm(self, timeout: float) -> dict[str, Any]:
        st = self.stats
        before = (st.failures.get("503", 0), st.failed_connects, st.connects, st.resyncs, st.snapshot_pages, st.gaps)
        self.all_live_at = None
        abort_at = time.time()
        for sub in self.subs:
            sub.drop()
        for sub in self.subs:
            sub.connect()
        try:
            await asyncio.wait_for(self.all_live.wait(), timeout)
        except TimeoutError:
            pass
        after = (st.failures.get("503", 0), st.failed_connects, st.connects, st.resyncs, st.snapshot_pages, st.gaps)
        d = [a - b for a, b in zip(after, before)]
        return {
            "abort_at": abort_at,
            "live_at": self.all_live_at if self.live == self.n else None,
            "http_503": d[0],
            "failed_connects": d[1],
            "connects": d[2],
            "resyncs": d[3],
            "snapshot_pages": d[4],
            "gaps": d[5],
            **self.gauges(),
        }

    async def cmd_home(self, timeout: float) -> int:
        """Subscribers a fault moved to another node go back to their first; how many did (once all are live)."""
        moved = sum(sub.home() for sub in self.subs)
        if moved:
            await asyncio.sleep(0)  # the closes count the subscribers down before the wait
            try:
                await asyncio.wait_for(self.all_live.wait(), timeout)
            except TimeoutError:
                pass
        return moved

    async def cmd_until(self, marks: dict[str, tuple[str, Any, int]], timeout: float) -> float | None:
        """When (time.time()) every subscriber had shown the marks of its channels; None past `timeout`. Each is
        checked until it shows them, in turn: a wait costs one check every 10 ms, not one per subscriber (16,000
        subscribers checked a hundred times a second would slow the very subscribers being waited for)."""
        deadline = time.monotonic() + timeout
        subs, i = self.subs, 0
        while i < len(subs):
            if cast(Resuming, subs[i].dialect).shows(marks):  # the fleet waits for marks on resuming dialects only
                i += 1
                continue
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.01)
        return time.time()

    async def cmd_stop(self) -> dict[str, int]:
        self.stopping = True
        for sub in self.subs:
            sub.close()
        await asyncio.sleep(0.05)  # let the close frames go out
        return self.gauges()


async def _worker_async(pipe: Any, spec: Spec) -> None:
    loop = asyncio.get_running_loop()
    try:
        worker = Worker(pipe, spec, loop)
    except Exception:
        pipe.send(("err", f"worker {os.getpid()}: {traceback.format_exc()}"))
        return
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if worker.n + 64 > nofile:  # say so now, not as EMFILE failures that look like a server refusing
        pipe.send(("err", f"worker {os.getpid()}: {worker.n} subscribers do not fit its open-files limit {nofile}"))
        return
    loop.add_reader(pipe.fileno(), worker.on_pipe)
    pipe.send(("ok", {"pid": os.getpid(), "nofile": nofile}))
    worker.spawn(worker.open_all())
    await worker.done
    try:
        loop.remove_reader(pipe.fileno())
    except (OSError, ValueError):
        pass
    for task in list(worker.tasks):
        task.cancel()
    await asyncio.gather(*worker.tasks, return_exceptions=True)


def worker_main(pipe: Any, spec: Spec) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us (Ctrl-C reaches the whole group)
    raise_nofile()
    import uvloop

    uvloop.run(_worker_async(pipe, spec))
