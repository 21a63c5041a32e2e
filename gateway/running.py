"""Run a long-lived command's main coroutine until it ends or a signal stops it, letting its cleanups run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("gateway")


def run_until_signalled(main: Coroutine[Any, Any, None]) -> None:
    """Run until done or interrupted; Ctrl-C, SIGTERM and SIGHUP (its terminal closed) cancel the main task so
    cleanups run. The second signal does not: it would cut them short (the demo's embedded servers would outlive
    it). A third one does, for a cleanup that hangs."""

    async def runner() -> None:
        task = asyncio.ensure_future(main)
        loop = asyncio.get_running_loop()
        signals = 0

        def stop() -> None:
            nonlocal signals
            signals += 1
            if signals == 2:
                log.warning("still stopping; signal once more to stop without waiting")
            else:
                task.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, stop)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    try:
        import uvloop

        uvloop.run(runner())
    except ImportError:  # pragma: no cover
        asyncio.run(runner())
