"""CPU time and memory of a system under test, descendants included, read from /proc (Linux).

A server is often a wrapper and its children (`npm` -> `node`, a uvicorn supervisor -> workers), so every
figure covers the given processes and all their descendants, found afresh at each reading by walking the
`ppid` of every /proc/<pid>/stat. Processes that vanish between the walk and the read are skipped.

    sampler = Sampler([server.pid], interval=0.5).start()
    ...
    sampler.stop()
    sampler.cpu_cores()      # average cores busy over the samples
    sampler.peak_rss_kb()
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable

TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _stat(pid: int | str) -> tuple[int, float] | None:
    """(ppid, utime + stime + cutime + cstime in ticks) of one process, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = data[data.rfind(b")") + 2 :].split()
    # fields[0] is field 3 (state): ppid is field 4, utime 14, stime 15, cutime 16, cstime 17.
    try:
        return int(fields[1]), float(int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14]))
    except (IndexError, ValueError):
        return None


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_KB
    except (OSError, IndexError, ValueError):
        return 0


def tree(pids: Iterable[int]) -> dict[int, float]:
    """The processes `pids` and all their live descendants: pid -> CPU ticks (utime + stime, all threads,
    plus the reaped children's cutime + cstime, so a child that exits does not take its time with it)."""
    table: dict[int, tuple[int, float]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = _stat(name)
            if s is not None:
                table[int(name)] = s
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[int, float] = {}
    stack = [p for p in pids if p in table]
    while stack:
        pid = stack.pop()
        if pid in out:
            continue
        out[pid] = table[pid][1]
        stack.extend(children.get(pid, ()))
    return out


def cpu_seconds(pids: Iterable[int]) -> float:
    """CPU seconds (user + system) used so far by `pids` and their descendants."""
    return sum(tree(pids).values()) / TICKS


def exact_cpu_seconds(pid: int) -> float:
    """CPU seconds one process's live threads have run, to the nanosecond (/proc/<pid>/task/*/schedstat), 0.0
    when it is gone. /proc/<pid>/stat counts in 10 ms ticks: a PostgreSQL backend that works 0.1 s in a run
    is read to about ±10 % that way. No descendants, and the time of threads that have exited is not in it."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat", "rb") as f:
                total += int(f.read().split()[0])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


def rss_kb(pids: Iterable[int]) -> int:
    """Resident memory (VmRSS, kB) of `pids` and their descendants."""
    return sum(_rss_kb(pid) for pid in tree(pids))


def measure(pids: Iterable[int]) -> tuple[float, int]:
    """(cpu_seconds, rss_kb) with one walk of /proc."""
    found = tree(pids)
    return sum(found.values()) / TICKS, sum(_rss_kb(pid) for pid in found)


class Sampler:
    """Records (time.time(), cpu_seconds, rss_kb) of `pids` and descendants every `interval` seconds in a
    daemon thread, from start() to stop() (both ends sampled). `samples` is the list, for plots."""

    def __init__(self, pids: Iterable[int], interval: float = 1.0) -> None:
        self.pids = list(pids)
        self.interval = interval
        self.samples: list[tuple[float, float, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Sampler:
        self._stop.clear()
        self._sample()
        self._thread = threading.Thread(target=self._run, name="procstat-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[tuple[float, float, int]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            self._sample()
        return self.samples

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _sample(self) -> None:
        cpu, rss = measure(self.pids)
        self.samples.append((time.time(), cpu, rss))

    def _run(self) -> None:
        next_at = time.monotonic() + self.interval
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            self._sample()
            next_at += self.interval

    def cpu_cores(self, since: float | None = None, until: float | None = None) -> float | None:
        """Average cores busy between the first and last sample in [since, until] (time.time() values)."""
        window = [s for s in self.samples if (since is None or s[0] >= since) and (until is None or s[0] <= until)]
        if len(window) < 2 or window[-1][0] <= window[0][0]:
            return None
        return (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])

    def peak_rss_kb(self) -> int:
        return max((s[2] for s in self.samples), default=0)

    def series(self) -> list[tuple[float, float, int]]:
        """(seconds since the first sample, cores busy since the previous sample, rss_kb) per sample."""
        out: list[tuple[float, float, int]] = []
        for prev, cur in zip(self.samples, self.samples[1:]):
            dt = cur[0] - prev[0]
            out.append((cur[0] - self.samples[0][0], (cur[1] - prev[1]) / dt if dt > 0 else 0.0, cur[2]))
        return out
