"""The handshake's gate (gateway.core.admission): a bounded rate in small bursts, less while the event loop runs
late, and retry hints that spread a refused crowd over the time the node needs to take it."""

from __future__ import annotations

import pytest

from gateway.core.admission import BURST_SECONDS, LAG_LIMIT, LEAST_RATE, Admission


def admitted(gate: Admission, start: float, seconds: float, tries_per_second: int) -> int:
    """How many of `tries_per_second` evenly spread attempts get in over `seconds`."""
    n = int(seconds * tries_per_second)
    return sum(gate.allow(start + i / tries_per_second) for i in range(n))


def test_a_storm_gets_in_at_the_rate_in_small_bursts() -> None:
    gate = Admission(1000)
    # At one instant, only a twentieth of a second's worth: one loop turn never holds a second of handshakes.
    assert sum(gate.allow(0.0) for _ in range(5000)) == int(1000 * BURST_SECONDS)
    got = admitted(gate, 0.0, 2.0, 20_000)
    assert 1900 <= got <= 2100  # about the rate, over two seconds


def test_a_late_loop_halves_the_rate_once_per_overload_and_an_on_time_loop_wins_it_back() -> None:
    gate = Admission(2000)
    gate.observe_lag(LAG_LIMIT * 2, 10.0)
    assert gate.current == 1000
    gate.observe_lag(LAG_LIMIT * 2, 10.05)  # the same overload seen again: no second halving yet
    assert gate.current == 1000
    gate.observe_lag(LAG_LIMIT * 2, 10.3)
    assert gate.current == 500
    gate.observe_lag(LAG_LIMIT / 2, 10.35)  # late, but not past the limit: hold
    assert gate.current == 500
    for i in range(100):  # on time: back to the configured rate, never past it
        gate.observe_lag(0.0, 11.0 + i * 0.05)
    assert gate.current == 2000


def test_the_rate_never_falls_below_a_floor() -> None:
    gate = Admission(100)
    for i in range(50):
        gate.observe_lag(5.0, float(i))
    assert gate.current == LEAST_RATE
    assert admitted(gate, 100.0, 10.0, 1000) >= LEAST_RATE * 9  # still some get in: the node does not look dead


def test_a_slower_rate_admits_fewer() -> None:
    fast, slow = Admission(1000), Admission(1000)
    slow.observe_lag(1.0, 0.0)
    assert admitted(slow, 1.0, 2.0, 5000) < admitted(fast, 1.0, 2.0, 5000) * 0.6


def test_retry_hints_spread_the_crowd_over_the_time_the_node_needs() -> None:
    gate = Admission(500)
    assert 250 <= gate.retry_after_ms(lambda: 0.5) <= 1250  # nobody refused yet: about a second
    refused = sum(not gate.allow(0.0) for _ in range(10_000))
    assert refused == gate.refused_total > 9000
    # 10,000 refused at 500 a second need 20 s: the hints reach that far, jittered from 250 ms.
    assert gate.retry_after_ms(lambda: 0.0) == 250
    assert 19_000 <= gate.retry_after_ms(lambda: 0.999) <= 20_300
    # A late loop halves the rate for a while: the hints stretch, but never past a quarter of the rate's time.
    for i in range(5):
        gate.observe_lag(1.0, 1.0 + i)
    assert gate.retry_after_ms(lambda: 0.999) <= 1000 * 10_000 / (500 / 4) + 250


def test_a_refused_crowd_is_forgotten_as_seconds_pass() -> None:
    gate = Admission(100)
    for _ in range(10_000):
        gate.allow(0.0)
    for _ in range(10):  # a new second: the last one's count halves (counted as the next refusal comes)
        gate.allow(1.5)
    assert 4900 <= gate.refused <= 5100
    for _ in range(10):  # long after: forgotten
        gate.allow(5.0)
    assert 1 <= gate.refused <= 10


def test_the_rate_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Admission(0)


def test_one_source_takes_at_most_its_share_and_the_others_still_get_in() -> None:
    gate = Admission(200, share=0.05)  # 10 a second each
    flood = others = 0
    for i in range(2000):  # two seconds: the flood asks 1,000 a second, twenty others one a second each
        now = i / 1000
        flood += gate.admit(now, 0.5, "flood") is None
        if i % 50 == 0:
            others += gate.admit(now, 0.5, ("other", i // 50 % 20)) is None
    assert flood <= 10 + 2 * 10 + 1  # its burst, then its share
    assert others == 40  # every other one got in at its first try


def test_a_source_past_its_share_lengthens_nobody_elses_hint() -> None:
    gate = Admission(200, share=0.05)
    for i in range(10_000):
        gate.admit(i / 10_000, 0.0, "flood")
    assert gate.refused == 0  # its refusals are its own: the crowd the hints spread for is empty
    assert gate.retry_after_ms(lambda: 0.999) <= 1250
    assert gate.refused_total > 9900  # still counted: /metrics says how many were turned away


def test_past_its_share_a_source_hears_a_hint_of_about_a_second() -> None:
    gate = Admission(200, share=0.05)
    hints = [gate.admit(0.0, 0.999, "one") for _ in range(11)]
    assert hints[:10] == [None] * 10
    assert hints[10] is not None and 250 <= hints[10] <= 1250


def test_the_node_refuses_a_crowd_of_sources_with_hints_spread_for_the_crowd() -> None:
    gate = Admission(100, share=0.05)
    refused = [gate.admit(0.0, 0.999, source) for source in range(1000)]
    assert refused.count(None) == int(100 * BURST_SECONDS)
    assert max(hint for hint in refused if hint is not None) > 5000  # ~1,000 refused at 100 a second: ~10 s


def test_a_whole_share_is_the_node_s_admission_as_it_was() -> None:
    gate = Admission(1000)
    assert gate.shares is None
    assert sum(gate.admit(0.0, 0.5, "one") is None for _ in range(5000)) == int(1000 * BURST_SECONDS)
