"""Waiting for what a test expects: a condition polled against a generous deadline, never a fixed sleep, so a
test holds on a machine whose two cores are shared and fails (saying what it waited for) when it never comes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def eventually(check: Callable[[], object], what: str = "the condition", timeout: float = 60.0) -> None:
    """Return once `check()` is true; fail after `timeout` seconds, naming `what`."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"still waiting for {what} after {timeout:g} s"
        await asyncio.sleep(0.005)
