"""The Jobs view's rules for statuses: buckets, group colours, the ring's label."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core.model import Counts
from gateway.core.status import LISTED, after_failure, buckets, group_status, ring_label


def counts(**kw: int) -> dict[str, int]:
    return {"queued": 0, "retrying": 0, "running": 0, "completed": 0, "failed": 0, **kw}


def test_queued_and_retrying_both_count_as_queued() -> None:
    assert buckets(counts(queued=2, retrying=3, running=1, completed=4, failed=5)) == {
        "queued": 5,
        "running": 1,
        "silent": 0,
        "done": 4,
        "failed": 5,
    }


def test_jobs_on_a_silent_cluster_count_apart_and_keep_their_trajectory_unfinished() -> None:
    assert buckets(counts(running=1, silent=3, completed=2))["silent"] == 3
    assert group_status(counts(silent=2, completed=5)) == "silent"
    assert ring_label(counts(silent=2, completed=5)) == "2 silent"
    assert Counts(silent=2, completed=1).active() == 2


@pytest.mark.parametrize(
    ("given", "colour"),
    [
        (counts(running=1, queued=3, failed=2), "running"),
        (counts(retrying=1, completed=3), "queued"),
        (counts(completed=3), "completed"),
        (counts(failed=2), "failed"),
        (counts(completed=1, failed=1), "neutral"),
        (counts(), "empty"),
    ],
)
def test_group_colour(given: dict[str, int], colour: str) -> None:
    assert group_status(given) == colour


@pytest.mark.parametrize(
    ("given", "label"),
    [
        (counts(running=2, queued=5), "2 running"),
        (counts(queued=4, retrying=1), "5 queued"),
        (counts(completed=9, failed=1), "Jobs"),
        (counts(), "Jobs"),
    ],
)
def test_ring_label(given: dict[str, int], label: str) -> None:
    assert ring_label(given) == label


def test_a_frame_job_gets_three_attempts_then_fails_for_good() -> None:
    assert after_failure(1) == ("retrying", 2)
    assert after_failure(2) == ("retrying", 3)
    assert after_failure(3) == ("failed", 3)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3), min_size=len(LISTED), max_size=len(LISTED)))
def test_counts_know_their_colour_as_the_mapping_rule_does(numbers: list[int]) -> None:
    """The relay colours groups from their Counts directly; it must be the rule the vectors check."""
    counts = Counts(**dict(zip(LISTED, numbers, strict=True)))
    assert counts.status() == group_status(counts.as_dict())


def test_a_copy_of_counts_does_not_move_with_the_aggregate() -> None:
    counts = Counts(running=2)
    copy = counts.copy()
    counts.add("running", -1)
    assert (copy.running, counts.running) == (2, 1)
