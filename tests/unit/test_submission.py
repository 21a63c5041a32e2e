"""A submission's derived status, in its order of precedence, and how the new task statuses meet every rule."""

import pytest

from gateway.core.control import REMOVABLE, RETRYABLE, TASK_ACTIONS, task_toast
from gateway.core.finish import FinishTracker, SETTLE
from gateway.core.model import Counts
from gateway.core.status import ACTIVE, BUCKET_OF, colour, ring_label
from gateway.core.submission import STAGING, submission_status


@pytest.mark.parametrize("staging", STAGING)
def test_data_not_on_the_cluster_yet_is_the_status_whatever_the_tasks(staging: str) -> None:
    assert submission_status(staging, Counts(running=3, failed=1), downloaded=False) == staging


@pytest.mark.parametrize(
    ("counts", "downloaded", "status"),
    [
        (Counts(running=1, failed=2), False, "running"),  # still at work despite failures
        (Counts(running=1, preempted=1), False, "running"),
        (Counts(preempted=1, failed=1, completed=3), False, "preempted"),
        (Counts(holding=2, preempted=1), False, "preempted"),  # a retry is needed before holding matters
        (Counts(failed=1, completed=5), False, "failed"),
        (Counts(failed=1, queued=3), False, "failed"),
        (Counts(holding=2, queued=1), False, "holding"),
        (Counts(queued=3, retrying=1), False, "pending"),
        (Counts(completed=4), False, "success"),
        (Counts(completed=4), True, "downloaded"),
        (Counts(), False, "pending"),  # submitted, no task yet
    ],
)
def test_status_from_tasks(counts: Counts, downloaded: bool, status: str) -> None:
    assert submission_status("ready", counts, downloaded) == status


def test_holding_and_preempted_against_every_jobs_view_rule() -> None:
    # Buckets: holding counts as Queued, preempted as Failed.
    assert (BUCKET_OF["holding"], BUCKET_OF["preempted"]) == ("queued", "failed")
    # Colours: holding waits (amber), preempted ended badly (red).
    assert (colour("holding"), colour("preempted")) == ("amber", "red")
    # The ring: holding tasks are in the queued count.
    assert ring_label({"holding": 2, "queued": 1}) == "3 queued"
    # Remove Running Jobs takes holding tasks; Retry Failed Jobs does not take preempted ones (Retry Preempted does).
    assert "holding" in REMOVABLE and "preempted" not in RETRYABLE
    assert TASK_ACTIONS["retry_preempted"].takes == ("preempted",)
    # Finishes: a holding task keeps its trajectory unfinished; a preempted one ends the wave with errors.
    assert "holding" in ACTIVE
    tracker = FinishTracker()
    tracker.job_changed(1, "preprocess", "queued", 2, 0.0)
    tracker.job_changed(1, "preprocess", "holding", 1, 0.1)
    assert tracker.take_finished(10.0, {}) == []
    tracker.job_changed(1, "preprocess", "preempted", 0, 1.0)
    (finish,) = tracker.take_finished(1.0 + SETTLE, {})
    assert (finish.title, finish.level) == ("Jobs completed with errors", "warning")


def test_task_action_toasts() -> None:
    assert task_toast(TASK_ACTIONS["hold"], 3, 3, []).message == "Held 3 task(s)"
    assert task_toast(TASK_ACTIONS["kill"], 4, 2, ["gpu-2"]).message == "Killed 2 task(s); cluster gpu-2 did not confirm"
    assert task_toast(TASK_ACTIONS["retry"], 5, 5, []).message == "Queued 5 task(s) for retry"
    assert task_toast(TASK_ACTIONS["retry_preempted"], 1, 1, []).message == "Queued 1 preempted task(s) for retry"
    assert task_toast(TASK_ACTIONS["unhold"], 0, 0, []).message == "No tasks to unhold"
