"""The relay's patience with Redis (gateway.relay.retry): a Redis that does not answer, hanging or failing, makes
it step down once the patience has run out; one that answers with a refusal does not."""

from __future__ import annotations

import asyncio

import pytest

from gateway.bus.errors import BusRefused, BusUnavailable
from gateway.relay.retry import BusOutOfReach, Patience, retry_redis


async def test_a_call_that_hangs_is_cut_off_at_the_patience() -> None:
    async def hangs() -> None:
        await asyncio.Event().wait()  # a half-open link: no answer, no error

    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(BusOutOfReach, match="has not answered for 0.2 s"):
        await retry_redis(hangs, Patience(0.2))
    assert loop.time() - started >= 0.2


async def test_failures_past_the_patience_step_down_and_earlier_ones_are_retried() -> None:
    calls = 0

    async def fails_twice() -> str:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise BusUnavailable("ConnectionError: connection refused")
        return "answered"

    assert await retry_redis(fails_twice, Patience(5.0)) == "answered"

    async def always_fails() -> None:
        raise BusUnavailable("ConnectionError: connection refused")

    with pytest.raises(BusOutOfReach):
        await retry_redis(always_fails, Patience(0.3))


async def test_a_refusal_is_an_answer_and_does_not_run_the_patience_out() -> None:
    calls = 0

    async def refused_then_taken() -> str:
        nonlocal calls
        calls += 1
        if calls <= 4:  # 0.05 + 0.1 + 0.2 + 0.4 s of backing off: past the patience, but Redis answered each time
            raise BusRefused("OutOfMemoryError: command not allowed when used memory > 'maxmemory'")
        return "published"

    assert await retry_redis(refused_then_taken, Patience(0.3)) == "published"
