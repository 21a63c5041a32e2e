"""A submission's derived status, in its order of precedence, and how the new task statuses meet every rule."""

import pytest

from gateway.control.commands import share
from gateway.core.control import (
    REMOVABLE,
    RETRYABLE,
    TASK_ACTIONS,
    WATCHED,
    Asked,
    Pending,
    edit_toast,
    not_deleted,
    task_toast,
    toast,
)
from gateway.core.finish import SETTLE, FinishTracker
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
        (Counts(queued=2, completed=43), False, "running"),  # under way, between two tasks: not pending
        (Counts(retrying=1, completed=4), False, "running"),  # Retry Failed after some were done
        (Counts(holding=2, completed=4), False, "holding"),
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
    # Remove Running Jobs takes holding tasks; Retry Failed Jobs takes preempted ones (they are counted as Failed).
    assert "holding" in REMOVABLE and "preempted" in RETRYABLE
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
    assert task_toast(TASK_ACTIONS["hold"], 3, 3).message == "Held 3 task(s)"
    assert (
        task_toast(TASK_ACTIONS["kill"], 4, 2, pending=[Pending("gpu-2", 2)]).message
        == "Killed 2 task(s); 2 on gpu-2 not confirmed yet"
    )
    assert (
        task_toast(TASK_ACTIONS["hold"], 80, 0, pending=[Pending("gpu-2", 80)]).message
        == "Holding 80 task(s) on gpu-2: not confirmed yet"
    )
    assert (
        task_toast(TASK_ACTIONS["retry_failed"], 4, 0, pending=[Pending("gpu-2", 4)]).message
        == "Queueing 4 failed task(s) for retry on gpu-2: not confirmed yet"
    )
    assert task_toast(TASK_ACTIONS["retry"], 5, 5).message == "Queued 5 task(s) for retry"
    assert task_toast(TASK_ACTIONS["retry_preempted"], 1, 1).message == "Queued 1 preempted task(s) for retry"
    assert task_toast(TASK_ACTIONS["unhold"], 0, 0).message == "No tasks to unhold"


def test_a_toast_is_a_success_only_when_everything_found_changed() -> None:
    """What the person reads, and in which colour: a cluster whose part is not confirmed yet never makes it a
    success, and nothing to act on is only information."""
    said = {
        (found, acted, waiting): task_toast(
            TASK_ACTIONS["hold"], found, acted, pending=[Pending("gpu-2", waiting)] if waiting else []
        )
        for found, acted, waiting in ((3, 3, 0), (3, 2, 0), (3, 0, 0), (3, 2, 1), (3, 0, 3), (0, 0, 0))
    }
    assert {k: (r.message, r.level) for k, r in said.items()} == {
        (3, 3, 0): ("Held 3 task(s)", "success"),
        (3, 2, 0): ("Held 2 of 3 task(s)", "warning"),
        (3, 0, 0): ("Held 0 of 3 task(s)", "warning"),
        (3, 2, 1): ("Held 2 task(s); 1 on gpu-2 not confirmed yet", "warning"),
        (3, 0, 3): ("Holding 3 task(s) on gpu-2: not confirmed yet", "warning"),
        (0, 0, 0): ("No tasks to hold", "info"),
    }
    assert [r.unconfirmed for r in said.values()] == [[], [], [], ["gpu-2"], ["gpu-2"], []]


def test_jobs_view_toasts() -> None:
    assert toast("retry", 0, 0).message == "No failed jobs found to retry"
    assert toast("retry", 5, 5, preempted=2).message == "Queued 5 failed job(s) for retry (2 of them preempted)"
    assert toast("retry", 5, 0, pending=[Pending("gpu-2", 3), Pending("cpu-big", 2)]).message == (
        "Queueing 5 failed job(s) for retry on cpu-big and gpu-2: not confirmed yet"
    )
    assert toast("remove", 2, 2).message == "Removed 2 job(s)"
    # Followed in the browser until the reports show every job retried, then said as a confirmed answer says it.
    followed = toast("retry", 9, 0, pending=[Pending("gpu-2", 9)], preempted_found=9)
    assert (followed.done, followed.note) == ("Queued {n} failed job(s) for retry", " (9 of them preempted)")
    assert toast("retry", 5, 5, preempted=2, preempted_found=2).note == ""  # nothing to follow: all said at once


def test_a_toast_says_which_cluster_is_silent_and_for_how_long() -> None:
    result = toast(
        "remove",
        5,
        1,
        pending=[Pending("gpu-2", 1, silent_seconds=300.0), Pending("cpu-big", 2), Pending("gpu-3", 1, [], 7300.0)],
    )
    assert result.message == (
        "Removed 1 job(s); 2 on cpu-big; 1 on gpu-2; 1 on gpu-3 not confirmed yet"
        "; cluster gpu-2 is silent (nothing heard for 5 min); cluster gpu-3 is silent (nothing heard for 2 h)"
    )
    assert result.unconfirmed == ["cpu-big", "gpu-2", "gpu-3"] and result.level == "warning"
    killed = task_toast(TASK_ACTIONS["kill"], 2, 0, pending=[Pending("gpu-2", 2, silent_seconds=20.0)])
    assert killed.message == (
        "Killing 2 task(s) on gpu-2: not confirmed yet; cluster gpu-2 is silent (nothing heard for under a minute)"
    )
    # An answer about a cluster that did not confirm never counts its part as zero, whatever a confirmed one did.
    some = toast("remove", 5, 1, pending=[Pending("gpu-2", 3)])
    assert some.message == "Removed 1 of 2 job(s); 3 on gpu-2 not confirmed yet"


def test_an_edit_a_cluster_has_not_confirmed_says_not_confirmed_yet_never_zero() -> None:
    """Edit / Priority and Edit / Instance Type speak of a cluster that did not confirm as every other action does."""
    alone = edit_toast("Priority set to 5", "Setting priority to 5", 1, 1, 1, [Pending("gpu-2", 1)])
    assert (alone.message, alone.acted, alone.level) == (
        "Setting priority to 5 on 1 submission(s) on gpu-2: not confirmed yet",
        0,
        "warning",
    )
    some = edit_toast(
        "Instance type set to highmem",
        "Changing instance type to highmem",
        3,
        3,
        1,
        [Pending("gpu-2", 1, silent_seconds=600.0), Pending("gpu-1", 0)],
    )
    assert some.message == (
        "Instance type set to highmem on 2 submission(s); 1 on gpu-2 not confirmed yet"
        "; cluster gpu-2 is silent (nothing heard for 10 min)"
    )
    assert some.unconfirmed == ["gpu-2"]
    confirmed = edit_toast("Priority set to 5", "Setting priority to 5", 2, 2, 0, [])
    assert (confirmed.message, confirmed.level) == ("Priority set to 5 on 2 submission(s)", "success")
    for said in (alone, some, confirmed):
        assert "did not confirm" not in said.message and " 0 " not in said.message


def test_an_unconfirmed_answer_says_what_the_browser_follows() -> None:
    """The jobs asked of a cluster that did not confirm, the words once they are counted and what a done job
    shows: what the browser needs to update the toast in place as the cluster's reports land."""
    asked = [Asked(7, 3, 1), Asked(8, 3, 2)]
    result = toast("retry", 3, 1, pending=[Pending("gpu-2", 2, asked)])
    assert (result.found, result.done, result.doing, result.becomes) == (
        3,
        "Queued {n} failed job(s) for retry",
        "Queueing {n} failed job(s) for retry",
        "next_attempt",
    )
    assert result.pending == [Pending("gpu-2", 2, asked)]
    assert {a.name: a.shows for a in TASK_ACTIONS.values()} == {
        "hold": "holding",
        "unhold": "released",
        "kill": "failed",
        "retry": "next_attempt",
        "retry_failed": "next_attempt",
        "retry_preempted": "next_attempt",
    }
    assert toast("remove", 2, 2).pending == []  # all confirmed: nothing to follow


def test_delete_analysis_on_a_cluster_that_has_not_confirmed_says_what_is_known_never_zero() -> None:
    waiting = toast("remove", 5, 3, pending=[Pending("gpu-2", 2, silent_seconds=600.0)])
    said = not_deleted("RDF", waiting)
    assert said.message == (
        "RDF not deleted yet: 3 job(s) stopped, 2 on gpu-2 not confirmed yet; cluster gpu-2 is silent (nothing heard"
        " for 10 min); delete it again once they have stopped"
    )
    assert (said.acted, said.unconfirmed, said.level) == (3, ["gpu-2"], "warning")
    nothing_yet = toast("remove", 1, 0, pending=[Pending("gpu-2", 1)])
    assert not_deleted("RDF", nothing_yet).message == (
        "RDF not deleted yet: 1 on gpu-2 not confirmed yet; delete it again once they have stopped"
    )


def test_an_answer_names_at_most_watched_jobs_each_cluster_its_share() -> None:
    """Past WATCHED jobs not confirmed, each cluster's part names its share of them (the browser follows those and
    counts the rest), where it was all or nothing."""
    assert share(80, 80) == 80
    parts = (9_000, 3_000, 1)
    named = [share(p, sum(parts)) for p in parts]
    assert named == [7_499, 2_499, 0] and sum(named) <= WATCHED
    assert share(WATCHED, WATCHED) == WATCHED
