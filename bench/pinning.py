"""CPU pinning for benchmarks that run servers and their clients on one machine (Linux).

On two cores, 16,000 subscribers in their worker processes and the servers they measure take turns on both, so
a server's figure holds its clients' work too. `split_cpus` gives the servers every CPU the run may use but the
last, which the clients get; `pin` moves a process, every thread of it, to a set of CPUs (threads it starts
later inherit it from the one that starts them).

    servers, clients = split_cpus()  # on CPUs 0-1: {0}, {1}
    pin(node.proc.pid, servers)
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def split_cpus(cpus: Iterable[int] | None = None) -> tuple[set[int], set[int]]:
    """(the servers' CPUs, the clients' CPU) out of `cpus` (default: those this process may run on)."""
    usable = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
    if len(usable) < 2:
        raise ValueError(f"pinning needs two CPUs or more, this run may use {usable}")
    return set(usable[:-1]), {usable[-1]}


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` on `cpus` only; a thread that ended meanwhile is skipped."""
    try:
        threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        raise ProcessLookupError(f"no process {pid} to pin") from None
    for thread in threads:
        try:
            os.sched_setaffinity(thread, cpus)
        except ProcessLookupError:
            continue


def cpus_of(pid: int) -> set[int]:
    """The CPUs process `pid`'s main thread may run on."""
    return set(os.sched_getaffinity(pid))
