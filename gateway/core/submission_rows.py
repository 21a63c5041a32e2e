"""The Submissions page's rows as the relay folds changes, without I/O: each submission's record and its tasks'
running totals, and per team the rows changed since its channel last published (gateway.core.batching sends them).

Every row taken for the team channel is also handed to the relay to save first (`take_to_save`): the windows the
page reads (gateway.store.submission_rows) are never older than a delta already sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from .aggregate import Aggregates, Change
from .submission import SubmissionAggregate, SubmissionRecord, SubmissionRow


class SubmissionRows:
    """Each submission's record and its tasks' running totals; per team, the rows changed since its channel
    last published."""

    def __init__(self, aggregates: Aggregates) -> None:
        self.aggregates = aggregates
        self.by_id: dict[int, SubmissionAggregate] = {}
        self.dirty: dict[int, set[int]] = {}  # per team
        self.to_save: list[tuple[int, SubmissionRow, bytes]] = []  # taken (team, row, its JSON), for the relay to save

    def load(self, loaded: Iterable[SubmissionAggregate], saved: Mapping[int, bytes] | None = None) -> None:
        """Start from a snapshot; `saved`: the rows as last saved (JSON by id), those unchanged are not sent again."""
        saved = saved or {}
        for agg in loaded:
            if agg.record is not None:
                self.by_id[agg.record.id] = agg
                self.aggregates.team(agg.record.team_id)
                row = agg.row()
                if row is None or saved.get(agg.record.id) != msgspec.json.encode(row):
                    self.dirty.setdefault(agg.record.team_id, set()).add(agg.record.id)

    def record_changed(self, record: SubmissionRecord) -> None:
        agg = self.by_id.get(record.id)
        if agg is None:
            agg = self.by_id[record.id] = SubmissionAggregate(record)
        elif agg.record is None or record.version >= agg.record.version:
            agg.record = record
        self.dirty.setdefault(record.team_id, set()).add(record.id)
        self.aggregates.team(record.team_id)

    def task_changed(self, change: Change) -> None:
        job = change.job
        if job.submission_id is None:
            return
        agg = self.by_id.get(job.submission_id)
        if agg is None:
            agg = self.by_id[job.submission_id] = SubmissionAggregate()
        if not change.counted and change.old_status != change.new_status:
            if change.old_status is not None:
                agg.counts.add(change.old_status, -1)
            if change.new_status is not None:
                agg.counts.add(change.new_status, 1)
            if change.new_status == "completed" and job.started_at and job.finished_at:
                agg.time_sum += (job.finished_at - job.started_at).total_seconds()
                agg.time_n += 1
        if job.updated_at is not None and (agg.last_change is None or job.updated_at > agg.last_change):
            agg.last_change = job.updated_at
        self.dirty.setdefault(job.team_id, set()).add(job.submission_id)

    def eta_changed(self, submission_id: int, eta: int | None) -> int | None:
        """A submission's estimated time left moved: its row goes out again; its team (None: no record yet)."""
        agg = self.by_id.get(submission_id)
        if agg is None:
            return None
        agg.eta = eta
        if agg.record is None:
            return None
        self.dirty.setdefault(agg.record.team_id, set()).add(submission_id)
        return agg.record.team_id

    def take_rows(self, team_id: int) -> list[SubmissionRow]:
        """The team's changed rows (by id), no longer changed; each is also queued to be saved."""
        rows = []
        encode = msgspec.json.encode
        for submission_id in sorted(self.dirty.pop(team_id, ())):
            agg = self.by_id.get(submission_id)
            row = agg.row() if agg is not None else None
            if row is not None:
                rows.append(row)
                self.to_save.append((team_id, row, encode(row)))
        return rows

    def take_to_save(self) -> list[tuple[int, SubmissionRow, bytes]]:
        """The rows taken since the last call (team, row, JSON): saved before the messages carrying them go out."""
        taken, self.to_save = self.to_save, []
        return taken
