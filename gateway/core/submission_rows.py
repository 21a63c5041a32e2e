"""The Submissions page's rows as the relay folds changes, without I/O: each submission's record and its tasks'
running totals, and per team the rows changed since its channel last published (gateway.core.batching sends them).

Every row taken for the team channel is also handed to the relay to save first (`take_to_save`): the windows the
page reads (gateway.store.submission_rows) are never older than a delta already sent.

Memory stays bounded however many submissions a team holds: past `cached` submissions, those least recently
changed are set aside (`trim`) once saved as they are and with no task waiting or running, and a change to one is
folded into it again as saved (`missing`, then `restore` with what the relay read back from the saved rows).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime
from typing import NamedTuple

import msgspec

from .aggregate import Aggregates, AnyChange, Change, SubmissionChange
from .submission import SubmissionAggregate, SubmissionRecord, SubmissionRow

CACHED = 100_000  # submissions kept in memory past those in use (GATEWAY_RELAY_SUBMISSIONS_CACHED)
# Rows a team's message takes at most (the rest go with its next ones): a cycle's work, its memory and the time
# the relay's loop is busy stay bounded when a start finds every row of a million to save.
TAKE_PART = 20_000
_TRIM_LOOK = 1_000  # a trim looks past the entries it must set aside at most this many more (those in use move on)


class SavedRow(NamedTuple):
    """A row taken to be saved: its team, the row and its JSON (as sent), and what folding it again needs."""

    team_id: int
    row: SubmissionRow
    json: bytes
    time_sum: float
    time_n: int
    last_change: datetime | None


class Restored(NamedTuple):
    """A saved row as read back (gateway.store.submission_rows.restore): enough to go on folding its changes."""

    team_id: int
    json: str
    time_sum: float
    time_n: int
    last_change: datetime | None


_row_decoder = msgspec.json.Decoder(SubmissionRow)


def row_digest(json: bytes) -> bytes:
    """What a start compares a derived row with: the MD5 of its JSON (PostgreSQL's md5() of the saved text), 16
    bytes a row rather than the row itself, so a start does not hold every saved row of a team."""
    return hashlib.md5(json, usedforsecurity=False).digest()


def restored_aggregate(saved: Restored) -> SubmissionAggregate:
    """The aggregate a saved row was derived from, for every figure its row shows."""
    row = _row_decoder.decode(saved.json)
    agg = SubmissionAggregate(
        SubmissionRecord(
            id=row.id,
            team_id=saved.team_id,
            trajectory_id=row.trajectory_id,
            user_id=row.user_id,
            project=row.project,
            title=row.title,
            priority=row.priority,
            instance_type=row.instance_type,
            cores=row.cores,
            memory_gb=row.memory_gb,
            preemptible=row.preemptible,
            staging=row.staging,
            held=row.held,
            reviewed=row.reviewed,
            # Only whether it was downloaded shows; a record that changes brings its own time.
            downloaded_at=(row.updated_at or row.created_at or datetime.min) if row.downloaded else None,
            created_at=row.created_at,
            updated_at=row.updated_at,
            version=row.version,
            acted=row.acted,
            acted_by=row.acted_by,
            acted_by_name=row.acted_by_name,
            acted_at=row.acted_at,
        )
    )
    agg.counts = row.counts
    agg.time_sum, agg.time_n, agg.last_change, agg.eta = saved.time_sum, saved.time_n, saved.last_change, row.eta
    return agg


class SubmissionRows:
    """Each submission's record and its tasks' running totals (the most recently changed `cached` of those set
    aside when idle, and every one in use); per team, the rows changed since its channel last published."""

    def __init__(self, aggregates: Aggregates, cached: int = CACHED) -> None:
        self.aggregates = aggregates
        self.cached = cached
        self.by_id: OrderedDict[int, SubmissionAggregate] = OrderedDict()  # least recently changed first
        self.dirty: dict[int, set[int]] = {}  # per team
        self.to_save: list[SavedRow] = []  # taken, for the relay to save
        self.set_aside = 0  # submissions set aside since the start (/metrics)
        self._idle_loaded: OrderedDict[int, None] = OrderedDict()  # a start's idle ones kept so far, oldest first
        self.restored = 0  # and folded again from their saved rows

    def load(self, loaded: Iterable[tuple[SubmissionAggregate, bytes | None]]) -> None:
        """Start from a snapshot, a part at a time: each submission with the `row_digest` of its row as last saved
        (None: none); those unchanged are not sent again, and past `cached` the idle ones are set aside as they come."""
        by_id, idle = self.by_id, self._idle_loaded
        for agg, digest in loaded:
            record = agg.record
            if record is None:
                continue
            by_id[record.id] = agg
            self.aggregates.team(record.team_id)
            row = agg.row()
            if row is None or digest != row_digest(msgspec.json.encode(row)):
                self.dirty.setdefault(record.team_id, set()).add(record.id)
            elif not agg.counts.active():
                idle[record.id] = None  # saved as it is and idle: the oldest past `cached` are set aside at once
                if len(idle) > self.cached:
                    oldest, _ = idle.popitem(last=False)
                    del by_id[oldest]
                    self.set_aside += 1

    def missing(self, changes: Iterable[AnyChange]) -> list[int]:
        """The submissions these changes fold into that were set aside (or are new): read their saved rows first."""
        by_id, wanted = self.by_id, set()
        for change in changes:
            if isinstance(change, SubmissionChange):
                if change.record.id not in by_id:
                    wanted.add(change.record.id)
            elif isinstance(change, Change) and change.job.submission_id is not None:
                if change.job.submission_id not in by_id:
                    wanted.add(change.job.submission_id)
        return sorted(wanted)

    def restore(self, saved: Iterable[Restored]) -> None:
        """Fold on from these saved rows (of submissions set aside); one already back in memory is kept as it is."""
        for s in saved:
            agg = restored_aggregate(s)
            if agg.record is not None and agg.record.id not in self.by_id:
                self.by_id[agg.record.id] = agg
                self.restored += 1

    def trim(self) -> int:
        """Set aside the least recently changed submissions past `cached`: only those saved as they are (no change
        waiting to go out or to be saved), with a record and no task waiting or running. How many were."""
        by_id = self.by_id
        over = len(by_id) - self.cached
        if over <= 0:
            return 0
        self._idle_loaded.clear()  # the start is over: from here on, the least recently changed go first
        pending = {s.row.id for s in self.to_save}  # empty once saved, when the relay trims
        dirty = self.dirty
        evicted = 0
        for _ in range(min(len(by_id), over + _TRIM_LOOK)):
            if evicted >= over:
                break
            submission_id, agg = next(iter(by_id.items()))
            record = agg.record
            if (
                record is None
                or agg.counts.active()
                or submission_id in dirty.get(record.team_id, ())
                or submission_id in pending
            ):
                by_id.move_to_end(submission_id)  # in use: it stays, and the look moves on
            else:
                del by_id[submission_id]
                evicted += 1
        self.set_aside += evicted
        return evicted

    def _touch(self, submission_id: int) -> SubmissionAggregate | None:
        agg = self.by_id.get(submission_id)
        if agg is not None:
            self.by_id.move_to_end(submission_id)
        return agg

    def record_changed(self, record: SubmissionRecord) -> None:
        agg = self._touch(record.id)
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
        agg = self._touch(job.submission_id)
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
        """The team's changed rows (by id, at most TAKE_PART: the rest wait for its next message), no longer
        changed; each is also queued to be saved."""
        rows = []
        encode = msgspec.json.encode
        taking = sorted(self.dirty.pop(team_id, ()))
        if len(taking) > TAKE_PART:  # a start that finds a million rows to save: a cycle never holds them all
            taking, self.dirty[team_id] = taking[:TAKE_PART], set(taking[TAKE_PART:])
        for submission_id in taking:
            agg = self.by_id.get(submission_id)
            row = agg.row() if agg is not None else None
            if agg is not None and row is not None:
                rows.append(row)
                self.to_save.append(SavedRow(team_id, row, encode(row), agg.time_sum, agg.time_n, agg.last_change))
        return rows

    def take_to_save(self) -> list[SavedRow]:
        """The rows taken since the last call: saved before the messages carrying them go out."""
        taken, self.to_save = self.to_save, []
        return taken
