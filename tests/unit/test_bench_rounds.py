"""The harness's rounds: the systems take turns, and a system measured several times is reported by its median
round. (`python -m bench <scenario> --rounds N` runs exactly these: bench/scenarios/ loop over `turns` and report
`median_round`; the quick runs of tests/bench/test_harness.py run each scenario's loop at one round.)"""

from __future__ import annotations

import inspect

from bench.measure import Outcome
from bench.registry import SCENARIOS, taking
from bench.scenarios import SCENARIOS as MEASURES
from bench.scenarios import median_round
from bench.scenarios.common import turns


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


def test_the_systems_take_turns_round_after_round() -> None:
    g, b = "gateway", "broadcaster"
    assert turns([g, b], 2) == [(0, g), (0, b), (1, g), (1, b)]
    assert turns(["gateway"], 1) == [(0, "gateway")]


def test_of_two_rounds_the_lower_is_reported_and_a_wrong_one_makes_the_system_wrong() -> None:
    chosen = median_round([_round(9.0), _round(7.0, correct=False, lost=2)], "cpu_us_per_frame")
    assert chosen.figures["cpu_us_per_frame"] == 7.0 and chosen.figures["cpu_us_per_frame_rounds"] == [9.0, 7.0]
    assert chosen.figures["correct"] is False and chosen.figures["lost"] == 2


def test_every_scenario_that_takes_rounds_measures_in_rounds() -> None:
    """The command line lets --rounds through only to the scenarios registered as taking it, and each of those
    measures with a `rounds` argument (the shared world passes it on when it is over 1)."""
    assert set(taking("rounds")) == {"fanout", "steady", "burst"}
    for name in taking("rounds"):
        assert "rounds" in inspect.signature(MEASURES[name]).parameters, name
        assert "systems" in SCENARIOS[name].takes, name  # --rounds 2 --systems gateway,broadcaster


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
