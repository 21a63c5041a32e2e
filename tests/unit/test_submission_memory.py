"""The relay's memory does not hold every submission a team ever made: past its cache, those saved as they are and
idle are set aside, and a change to one is folded into it as saved, so the row that goes out carries the right
figures (counts, tasks, average frame time, title). The store's side (the saved row read back) is played here by
the rows the core handed over to save, as gateway.store.submission_rows.restore() returns them."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from gateway.core.aggregate import AnyChange, Change, SubmissionChange
from gateway.core.batching import Batcher
from gateway.core.model import Job
from gateway.core.submission import SubmissionAggregate, SubmissionRecord
from gateway.core.submission_rows import TAKE_PART, Restored, SavedRow, row_digest

T0 = datetime(2026, 12, 6, 12, tzinfo=UTC)
CACHED = 5
SUBMISSIONS = 30
_CYCLES = itertools.count(60.0, 60.0)  # cycles a minute apart: every one's team message is due


def job(job_id: int, submission_id: int, status: str, seconds: float = 0.0, version: int = 1) -> Job:
    return Job(
        id=job_id,
        team_id=1,
        trajectory_id=7,
        cluster_id=1,
        kind="analysis",
        name="Analysis frame",
        status=status,
        version=version,
        submission_id=submission_id,
        started_at=T0 if seconds else None,
        finished_at=T0 + timedelta(seconds=seconds) if seconds else None,
        updated_at=T0 + timedelta(seconds=version),
    )


def published(core: Batcher, saved: dict[int, SavedRow]) -> dict[int, dict[str, Any]]:
    """The rows the team channel carries this cycle, by id; what they saved is kept as the database would."""
    rows: dict[int, dict[str, Any]] = {}
    for publication in core.take_team_publications(now=next(_CYCLES)):
        for row in msgspec.json.decode(publication.json).get("submissions") or ():
            rows[row["id"]] = row
    for s in core.submissions.take_to_save():
        saved[s.row.id] = s
    core.submissions.trim()  # the relay trims once the rows are saved
    return rows


def read_back(saved: dict[int, SavedRow], ids: list[int]) -> list[Restored]:
    return [
        Restored(saved[i].team_id, saved[i].json.decode(), saved[i].time_sum, saved[i].time_n, saved[i].last_change)
        for i in ids
        if i in saved
    ]


def test_memory_holds_the_cache_not_every_submission_and_a_change_to_one_set_aside_goes_out_right() -> None:
    core = Batcher(epoch=1, submissions_cached=CACHED)
    core.add_trajectory(7, 1, "Run")
    saved: dict[int, SavedRow] = {}
    ids = list(range(1, SUBMISSIONS + 1))
    core.apply([SubmissionChange(record=SubmissionRecord(id=i, team_id=1, title=f"shot {i}")) for i in ids])
    # Two tasks each, both completed: 10 and 20 seconds (an average frame of 15 s).
    changes = []
    for i in ids:
        for k, seconds in ((0, 10.0), (1, 20.0)):
            changes.append(Change(old_status=None, new_status="queued", job=job(i * 10 + k, i, "queued")))
            completed = job(i * 10 + k, i, "completed", seconds, version=2)
            changes.append(Change(old_status="queued", new_status="completed", job=completed))
    core.apply(changes)
    first = published(core, saved)
    assert first[1]["status"] == "success" and first[1]["avg_frame"] == 15.0
    assert len(core.submissions.by_id) == CACHED  # not all 30: the rest were saved as they are, then set aside
    assert 1 not in core.submissions.by_id

    # One task of the first submission runs again, and the second is renamed: both were set aside.
    again: list[AnyChange] = [
        Change(old_status="completed", new_status="running", job=job(10, 1, "running", version=3)),
        SubmissionChange(record=SubmissionRecord(id=2, team_id=1, title="shot 2, renamed", version=2)),
    ]
    missing = core.submissions.missing(again)
    assert missing == [1, 2]
    core.submissions.restore(read_back(saved, missing))
    core.apply(again)
    rows = published(core, saved)
    assert rows[1]["status"] == "running" and rows[1]["tasks"] == 2
    assert rows[1]["counts"]["running"] == 1 and rows[1]["counts"]["completed"] == 1
    assert rows[1]["avg_frame"] == 15.0 and rows[1]["title"] == "shot 1"  # totals and record as before
    assert rows[2]["title"] == "shot 2, renamed" and rows[2]["status"] == "success" and rows[2]["tasks"] == 2
    assert rows[2]["avg_frame"] == 15.0
    # The running one stays in memory (its estimate of time left moves without a change); memory stays bounded.
    assert 1 in core.submissions.by_id and len(core.submissions.by_id) <= CACHED + 1
    assert core.submissions.restored == 2


def test_a_row_read_back_is_the_row_that_was_saved() -> None:
    core = Batcher(epoch=1, submissions_cached=1)
    core.add_trajectory(7, 1, "Run")
    saved: dict[int, SavedRow] = {}
    record = SubmissionRecord(
        id=9, team_id=1, title="shot 9", project="p", priority=3, cores=8, memory_gb=32, preemptible=True,
        held=True, reviewed=True, downloaded_at=T0, created_at=T0, updated_at=T0, acted="hold", acted_by=4,
        acted_by_name="Ada", acted_at=T0, user_id=4, trajectory_id=7, version=5,
    )  # fmt: skip
    core.apply([SubmissionChange(record=record)])
    core.apply([Change(old_status=None, new_status="completed", job=job(90, 9, "completed", 12.5, version=2))])
    before = published(core, saved)[9]
    core.apply([SubmissionChange(record=SubmissionRecord(id=10, team_id=1, title="other"))])
    published(core, saved)
    assert 9 not in core.submissions.by_id
    core.submissions.restore(read_back(saved, [9]))
    agg = core.submissions.by_id[9]
    assert msgspec.json.decode(msgspec.json.encode(agg.row())) == before


def test_a_start_keeps_the_idle_saved_ones_up_to_the_cache_and_takes_a_million_rows_in_parts() -> None:
    core = Batcher(epoch=1, submissions_cached=CACHED)
    loaded = []
    for i in range(1, 41):
        agg = SubmissionAggregate(SubmissionRecord(id=i, team_id=1, title=f"shot {i}"))
        saved = row_digest(msgspec.json.encode(agg.row())) if i <= 30 else None  # 31..40 never saved
        loaded.append((agg, saved))
    core.load_submissions(loaded[:20])  # a start reads its submissions a part at a time
    core.load_submissions(loaded[20:])
    # The 5 newest idle ones saved as they are, and every one to save: never all 40.
    assert sorted(core.submissions.by_id) == [*range(26, 31), *range(31, 41)]
    assert core.submissions.set_aside == 25
    many = Batcher(epoch=1)
    many.apply([SubmissionChange(record=SubmissionRecord(id=i, team_id=1, title="t")) for i in range(TAKE_PART + 5)])
    first = msgspec.json.decode(many.take_team_publications(now=next(_CYCLES))[0].json)
    assert first["reload_submissions"] is True and len(many.submissions.take_to_save()) == TAKE_PART
    many.take_team_publications(now=next(_CYCLES))  # the rest with the team's next message
    assert len(many.submissions.take_to_save()) == 5
