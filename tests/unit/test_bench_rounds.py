"""The harness's rounds: a system measured several times is reported by its median round."""

from __future__ import annotations

from bench.measure import Outcome
from bench.scenarios import median_round


def _round(cpu: float, correct: bool = True, lost: int = 0, **more: object) -> Outcome:
    return Outcome(
        {"cpu_us_per_frame": cpu, "p99_ms": cpu * 2, "correct": correct, "lost": lost, "stale": 0, **more}, [(cpu, 1.0)]
    )


def test_the_median_round_is_reported_whole_with_every_rounds_figure() -> None:
    chosen = median_round([_round(9.0), _round(7.0), _round(12.0)], "cpu_us_per_frame")
    assert (
        chosen.figures["cpu_us_per_frame"] == 9.0 and chosen.figures["p99_ms"] == 18.0 and chosen.curve == [(9.0, 1.0)]
    )
    assert chosen.figures["cpu_us_per_frame_rounds"] == [9.0, 7.0, 12.0]


def test_a_wrong_round_makes_the_system_wrong_and_saturation_comes_from_the_last_round() -> None:
    chosen = median_round(
        [_round(8.0), _round(7.0, correct=False, lost=3), _round(9.0, saturation_deliveries_per_s=5)],
        "cpu_us_per_frame",
    )
    assert chosen.figures["cpu_us_per_frame"] == 8.0
    assert chosen.figures["correct"] is False and chosen.figures["lost"] == 3
    assert chosen.figures["saturation_deliveries_per_s"] == 5


def test_one_round_is_itself() -> None:
    only = _round(5.0)
    assert median_round([only], "cpu_us_per_frame") is only


def test_fanout_checks_say_the_node_alone_and_the_node_with_its_relay():
    from bench.scenarios.fanout import _fanout_checks, _median

    systems = {
        "gateway": {"cpu_us_per_frame": 12.0, "node_cpu_us_per_frame_median": 10.0, "rss_kb_per_conn": 7.0},
        "floor": {"cpu_us_per_frame": 8.0, "node_cpu_us_per_frame_median": 8.0, "rss_kb_per_conn": 1.6},
    }
    lines = _fanout_checks(systems, 1000)
    assert "- gateway CPU per frame, node alone: 10.00 µs, 1.25 × the raw-write floor (target ≤ 1.15)" in lines
    assert "- gateway CPU per frame, node + relay: 12.00 µs, 1.50 × the raw-write floor (target ≤ 1.15)" in lines
    assert _median([9.0, None, 7.0, 12.0]) == 9.0 and _median([None]) is None
