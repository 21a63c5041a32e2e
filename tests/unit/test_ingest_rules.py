"""Whether a cluster's report still applies to a job (the same rules hold in SQL)."""

import pytest

from gateway.core.ingest import report_applies


@pytest.mark.parametrize(
    ("attempts", "status", "removed", "attempt", "new", "applies"),
    [
        (1, "queued", False, 1, "running", True),
        (1, "running", False, 1, "completed", True),
        (2, "running", False, 1, "failed", False),  # a stale attempt's report
        (1, "completed", False, 1, "running", False),  # terminal sticks
        (1, "failed", False, 1, "completed", False),
        (1, "failed", False, 2, "retrying", True),  # ... unless retried
        (1, "running", False, 1, "queued", False),  # a late queued never undoes running
        (1, "running", False, 1, "retrying", False),
        (1, "running", True, 3, "running", False),  # removed stays removed
    ],
)
def test_report_rules(attempts: int, status: str, removed: bool, attempt: int, new: str, applies: bool) -> None:
    assert report_applies(attempts, status, removed, attempt, new) is applies
