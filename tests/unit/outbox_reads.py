"""Reading a test database's outbox to the end, for the relay's unit tests."""

from __future__ import annotations

import asyncio
import time

from gateway.core.aggregate import Change, MembershipChange, SubmissionChange
from gateway.store.outbox import OutboxReader, ReadResult


async def read_all(reader: OutboxReader) -> ReadResult:
    """Read until everything committed so far is read: another database's open transaction (other tests share
    the server) may hold the horizon back for a while, as any open transaction does."""
    changes: list[Change | SubmissionChange | MembershipChange] = []
    deadline = time.monotonic() + 30.0
    while True:
        result = await reader.read()
        changes += result.changes
        if not await reader.peek():
            return ReadResult(changes, result.horizon, held_back=False, full=False)
        assert time.monotonic() < deadline, "the outbox stayed held back"
        await asyncio.sleep(0.01)
