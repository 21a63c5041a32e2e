"""bench.pinning: the servers' CPUs and the clients' CPU, and a process pinned whole, every thread of it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.pinning import cpus_of, pin, split_cpus


def test_the_clients_get_the_last_cpu_and_the_servers_the_rest() -> None:
    assert split_cpus([0, 1]) == ({0}, {1})
    assert split_cpus([3, 0, 2, 1]) == ({0, 1, 2}, {3})


def test_one_cpu_cannot_be_split() -> None:
    with pytest.raises(ValueError, match="two CPUs or more"):
        split_cpus([0])


def test_every_thread_of_a_process_is_pinned() -> None:
    one = {min(os.sched_getaffinity(0))}
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import threading, time; threading.Thread(target=time.sleep, args=(60,), daemon=True).start();"
            " print('ready', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        threads = [int(t) for t in os.listdir(f"/proc/{child.pid}/task")]
        assert len(threads) >= 2
        pin(child.pid, one)
        assert cpus_of(child.pid) == one
        assert all(set(os.sched_getaffinity(t)) == one for t in threads)
    finally:
        child.kill()
        child.communicate()
    with pytest.raises(ProcessLookupError):
        pin(child.pid, one)
