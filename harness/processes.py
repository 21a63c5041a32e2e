"""The processes a test or a benchmark started: what it knows of them from /proc (Linux), which are a process's
descendants and whether one is still alive (a zombie has exited; only its parent has not collected it yet), and
how it stops them (asked first, SIGTERM, then for good, SIGKILL)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def stop(processes: Iterable[subprocess.Popen[bytes]], grace: float = 10.0) -> None:
    """SIGTERM each one still running, all at once; SIGKILL whichever has not exited `grace` seconds later."""
    running = [p for p in processes if p.poll() is None]
    for p in running:
        p.terminate()
    for p in running:
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
