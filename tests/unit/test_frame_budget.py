"""A websocket client's budget of frames and bytes: every frame costs, bursts are bounded, time refills."""

from __future__ import annotations

from gateway.core.ratelimit import FrameBudget


def test_a_burst_of_four_seconds_worth_then_the_rate() -> None:
    budget = FrameBudget(frame_rate=100, byte_rate=1000)
    budget.refill(0.0)
    assert budget.frames == 400 and budget.bytes == 4000
    budget.take_frames(400)
    assert budget.take_bytes(4000, 0.0) and not budget.take_bytes(1, 0.0)
    budget.refill(1.0)  # a second later: a second's worth back
    assert round(budget.frames) == 100 and round(budget.bytes) == 999


def test_idle_time_refills_no_further_than_the_burst() -> None:
    budget = FrameBudget(frame_rate=10, byte_rate=10)
    budget.take_frames(40)
    budget.refill(0.0)
    budget.refill(3600.0)
    assert budget.frames == 40 and budget.bytes == 40


def test_the_byte_burst_holds_the_largest_message() -> None:
    budget = FrameBudget(frame_rate=1, byte_rate=1, min_byte_burst=2 * (65536 + 14))
    assert budget.take_bytes(65536 + 14, 0.0) and budget.take_bytes(65536 + 14, 0.0)
    assert not budget.take_bytes(1, 0.0)
