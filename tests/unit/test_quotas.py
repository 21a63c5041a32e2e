"""Rows a team's clusters may create an hour (gateway.web.cluster.quotas): all of a request's or none, given back when
the write fails, counted per team."""

from __future__ import annotations

import pytest

from gateway.web.cluster.quotas import Creations
from gateway.web.http.guards import Refused


def test_a_batch_past_what_is_left_is_refused_whole_with_the_wait_until_it_fits() -> None:
    quotas = Creations(jobs_per_hour=3600, trajectories_per_hour=10)  # a job a second
    with quotas.spending("jobs", 7, 3000):
        pass
    with pytest.raises(Refused) as refused:
        with quotas.spending("jobs", 7, 700):
            raise AssertionError("nothing is written past the budget")
    assert (refused.value.status, refused.value.code) == (429, "quota_exceeded")
    assert refused.value.retry_after is not None and 99 <= refused.value.retry_after <= 101
    assert "GATEWAY_MAX_NEW_JOBS_PER_HOUR" in refused.value.message and "nothing was written" in refused.value.message
    with quotas.spending("jobs", 7, 600):  # what is left still fits
        pass
    with quotas.spending("jobs", 8, 3600):  # another team has its own
        pass


def test_a_write_that_fails_gives_its_rows_back() -> None:
    quotas = Creations(jobs_per_hour=100, trajectories_per_hour=10)
    for _ in range(3):
        with pytest.raises(ValueError), quotas.spending("jobs", 7, 100):
            raise ValueError("an invalid report")
    with quotas.spending("jobs", 7, 100):
        pass


def test_trajectories_analyses_and_submissions_share_one_budget_apart_from_jobs() -> None:
    quotas = Creations(jobs_per_hour=100, trajectories_per_hour=2)
    for _ in range(2):
        with quotas.spending("trajectories", 7, 1):
            pass
    with pytest.raises(Refused) as refused, quotas.spending("trajectories", 7, 1):
        pass
    assert "trajectories, analyses and submissions" in refused.value.message
    with quotas.spending("jobs", 7, 100):
        pass


def test_more_than_a_whole_budget_at_once_is_invalid_and_zero_is_no_limit() -> None:
    quotas = Creations(jobs_per_hour=100, trajectories_per_hour=0)
    with pytest.raises(Refused) as refused, quotas.spending("jobs", 7, 101):
        pass
    assert refused.value.status == 422
    for _ in range(1000):
        with quotas.spending("trajectories", 7, 1):
            pass
