"""`gateway serve --workers N`: N full nodes on one port, one process each, so a machine's cores all serve.

Each worker binds the port itself with SO_REUSEPORT and the kernel spreads new connections over them (by a hash
of each connection's addresses). Every worker is a whole node: its own PostgreSQL pool, its own Redis
subscriber, every channel; nothing is shared between them but the port. The parent only watches: a worker that
dies is started again after a second, and SIGTERM or Ctrl-C stops every worker the way one node stops (SIGTERM
after the drain of gateway.web.node.leaving; its websockets closed with 1012 and a retry hint each, the clients
reconnect to the others, or to it once it is back).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from multiprocessing.process import BaseProcess

from ...config import WORKER_ENV, Settings

log = logging.getLogger("gateway")

RESTART_AFTER = 1.0  # seconds before a worker that died is started again
STOP_TIMEOUT = 30.0  # seconds the workers get to close their connections (after their drain) before they are killed


def serve_workers(settings: Settings, host: str, port: int, workers: int) -> int:
    """Run `workers` nodes until a signal stops them; the exit status (0 once stopped by a signal)."""
    context = multiprocessing.get_context("spawn")  # a fresh interpreter each: no loop or pool inherited
    running: dict[int, BaseProcess] = {}
    stopping = False
    stopped_by: int = signal.SIGTERM

    def start(index: int) -> None:
        process = context.Process(
            target=_worker, args=(settings, host, port, index, os.getpid()), name=f"gateway-worker-{index}"
        )
        process.start()
        running[index] = process
        log.info("worker %d started (pid %s)", index, process.pid)

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping, stopped_by
        stopping, stopped_by = True, signum

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for index in range(workers):
        start(index)
    while not stopping:
        time.sleep(0.2)
        for index, process in list(running.items()):
            if not process.is_alive() and not stopping:
                log.error("worker %d exited with %s: starting it again", index, process.exitcode)
                time.sleep(RESTART_AFTER)
                start(index)
    for process in running.values():  # SIGTERM: each drains first (gateway.web.node.leaving); Ctrl-C: at once
        if process.pid is not None and process.is_alive():
            os.kill(process.pid, stopped_by)
    deadline = time.monotonic() + STOP_TIMEOUT + (settings.drain_seconds if stopped_by == signal.SIGTERM else 0)
    for process in running.values():
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
    return 0


def _worker(settings: Settings, host: str, port: int, index: int, parent: int) -> None:
    from ..app import create_app
    from ..serving import listeners, node_server
    from .logs import configure

    os.setsid()  # a terminal's Ctrl-C reaches the parent alone, which stops each worker once, gracefully
    _end_with_parent()
    if os.getppid() != parent:  # the parent died before this worker could ask to be told: it has no one to serve
        return
    os.environ[WORKER_ENV] = str(index)
    configure(settings.log_level, settings.log_format)
    sockets = listeners(host, port, settings.health_host, settings.health_port, reuse_port=True)
    for sig in (signal.SIGTERM, signal.SIGINT):  # the server raises the signal again once it has shut down: exit 0
        signal.signal(sig, _stopped)
    node_server(create_app(settings), settings).run(sockets)


def _stopped(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _end_with_parent() -> None:
    """SIGTERM this worker when the parent dies, however it dies (Linux's PR_SET_PDEATHSIG): a parent killed
    with SIGKILL must not leave workers holding the port."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the parent's SIGTERM still stops them
