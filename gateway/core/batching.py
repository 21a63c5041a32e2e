"""Batching, without I/O: fold captured changes into aggregates and per-channel batches, stamped and encoded once.

`Batcher` keeps every team's and trajectory's counts, coalesces a cycle's changes per job (latest version
wins), detects finished waves and paces the light team channel; what it hands out are `Publication`s, one
message per channel with its sequence, encoded once per wire format. The relay (gateway.relay) reads the
outbox and feeds `apply()`; its publish cycle (gateway.core.publish_cycle) takes what `take_*()` returns and
the relay publishes it. The relay owns the clock: it passes `now` in and schedules the next wake-up from
`next_due()`.

Its parts: `JobWindows` (gateway.core.windows: each job channel's pace), `Sequences` (gateway.core.publication:
each channel's position in the epoch; a message stamped and encoded once), `SubmissionRows`
(gateway.core.submission_rows: the Submissions page's rows and task counts) and `Extras` (gateway.core.extras:
finish notices and glows, presence and cluster metrics: messages that are not job deltas).
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from . import channels
from .aggregate import (
    Aggregates,
    AnyChange,
    Change,
    MembershipChange,
    OwnershipChange,
    SubmissionChange,
    TeamAggregate,
    TrajectoryAggregate,
)
from .eta import EtaTracker
from .extras import Extras
from .finish import SETTLE, cuts_short
from .grouping import Group, group_order
from .model import Job, Overrun, TrajectorySummary
from .protocol import Batch, Summary, make_cursor
from .publication import Publication, Sequences
from .submission import SubmissionAggregate
from .submission_rows import CACHED, SubmissionRows
from .windows import JobWindows
from .work_snapshot import WorkSnapshot

MAX_JOBS_PER_BATCH = 500
MAX_BATCH_BYTES = 256 * 1024  # keeps every frame well under a client's 1 MiB message limit
# The light team channel: at most 2 messages a second per team (a change that finds it quiet goes out at once).
# Every summary is written to every member's Jobs view: at 4 a second they were most of a busy node's frames
# (docs/performance.md, steady), and twice a second is as fast as a person reads a moving count.
TEAM_INTERVAL = 0.5
# A team message carries at most this many changed submission rows; past it (a relay's first start on a large
# team) it says `reload_submissions` instead, and the pages read their windows again.
MAX_ROWS_PER_SUMMARY = 1_000
SUMMARY_STATE_PREFIX = "t:"


class Batcher:
    """One partition's aggregates and channel sequences in one relay epoch, and the batches they produce."""

    def __init__(self, epoch: int, settle: float = SETTLE, submissions_cached: int = CACHED) -> None:
        self.epoch = epoch
        self.aggregates = Aggregates()
        self.seqs = Sequences(epoch)
        self.windows = JobWindows()  # the job channels' deltas, each channel at its own pace
        self._team_sent_at: dict[int, float] = {}
        # Teams whose channel may have something to send (summaries or submission rows): a cycle looks at
        # these, not at every team of the partition.
        self._teams_to_send: set[int] = set()
        self._names: dict[int, tuple[str, str]] = {}  # trajectory id -> its channel and its team's jobs channel
        self.submissions = SubmissionRows(self.aggregates, submissions_cached)
        self.eta = EtaTracker()  # the estimated time left (gateway.core.eta)
        self.extras = Extras(self.aggregates, self.seqs, settle, self.submissions)
        self.finishes = self.extras.finishes
        self.memberships: list[MembershipChange] = []  # to announce to every node this cycle
        self.ownerships: list[OwnershipChange] = []  # channels that moved to another team, to announce too
        self.changes_applied = 0
        self.deltas_taken = 0
        # The extras' messages, as the relay asks for them.
        self.take_finishes = self.extras.take_finishes
        self.channels_for_finishes = self.extras.channels_for_finishes
        self.finish_publications = self.extras.finish_publications
        self.team_extra_publication = self.extras.team_extra_publication

    # -- input

    def load(self, trajectories: Iterable[TrajectoryAggregate]) -> None:
        """Start from a consistent snapshot; the first cycle then publishes every team's whole state."""
        for agg in trajectories:
            self.aggregates.add_trajectory(agg)
            self.aggregates.team(agg.team_id).dirty.add(agg.id)
            self._teams_to_send.add(agg.team_id)

    def open_unrecorded_waves(self) -> None:
        """At takeover, once the recorded waves are restored (`finishes.restore`): every trajectory at work in the
        snapshot with no open wave has one from now on (gateway.core.finish, `open_unrecorded`)."""
        open_unrecorded = self.finishes.open_unrecorded
        for team in self.aggregates.teams.values():
            for trajectory_id, traj in team.trajectories.items():
                if traj.active():
                    open_unrecorded(trajectory_id)

    def add_trajectory(self, trajectory_id: int, team_id: int, name: str) -> None:
        if not self.aggregates.known(trajectory_id):
            self.aggregates.add_trajectory(TrajectoryAggregate(id=trajectory_id, team_id=team_id, name=name))

    def take_memberships(self) -> list[MembershipChange]:
        taken, self.memberships = self.memberships, []
        return taken

    def take_ownerships(self) -> list[OwnershipChange]:
        taken, self.ownerships = self.ownerships, []
        return taken

    def _moved(self, change: OwnershipChange) -> None:
        """A trajectory moved to another team (it has no jobs: their keys would have held it): forgotten here,
        so its next job registers it under its new team (and in its new team's partition's relay), and
        announced, so nodes end the old team's subscriptions."""
        self.ownerships.append(change)
        kind, _, ident = change.channel.partition(":")
        if kind == "trajectory" and ident.isdigit():
            self.aggregates.forget(int(ident))
            self._names.pop(int(ident), None)

    def unknown_trajectories(self, changes: Iterable[AnyChange]) -> set[int]:
        """Trajectories whose names the adapter must look up before `apply()`."""
        return {
            c.job.trajectory_id
            for c in changes
            if isinstance(c, Change) and not self.aggregates.known(c.job.trajectory_id)
        }

    def load_submissions(self, loaded: Iterable[tuple[SubmissionAggregate, bytes | None]]) -> None:
        """Submissions as of the snapshot, a part at a time, each with the digest of its row as last saved (only
        those changed are sent; gateway.core.submission_rows)."""
        self.submissions.load(loaded)
        self._teams_to_send.update(self.submissions.dirty)

    def load_work(self, snapshot: WorkSnapshot) -> None:
        """The unfinished work and recent durations as of the snapshot, for the estimates of time left."""
        self.eta.load(snapshot)

    def apply(self, changes: Iterable[AnyChange], now: float = 0.0) -> None:
        task_changed, eta_changed = self.submissions.task_changed, self.eta.job_changed
        to_send, add, names, finishes = self._teams_to_send, self.windows.add, self._names, self.finishes
        for change in changes:
            if isinstance(change, MembershipChange):
                self.memberships.append(change)
                continue
            if isinstance(change, OwnershipChange):
                self._moved(change)
                continue
            if isinstance(change, SubmissionChange):
                self.submissions.record_changed(change.record)
                to_send.add(change.record.team_id)
                continue
            job = change.job
            if job.submission_id is not None:  # a submission's task: its row's counts
                task_changed(change)
            traj = self.aggregates.apply(change)
            eta_changed(change)
            # A change read again after a takeover (counted) is in what the wave restored from the database holds.
            if not change.counted or traj.id not in finishes.restored:
                finishes.job_changed(
                    traj.id,
                    job.kind,
                    change.new_status,
                    traj.active(),
                    now,
                    job.updated_at,
                    job.submission_id,
                    cuts_short(change.old_status, change.new_status, job.error),
                )
            pair = names.get(job.trajectory_id)
            if pair is None:  # a trajectory's jobs are of its team (the database's composite keys hold them there)
                pair = names[job.trajectory_id] = (
                    channels.trajectory(job.trajectory_id),
                    channels.team_jobs(job.team_id),
                )
            add(pair[0], job)
            add(pair[1], job)
            to_send.add(traj.team_id)
            if job.submission_id is not None:
                to_send.add(job.team_id)
            self.changes_applied += 1

    def refresh_eta(self, now: float, wall: float) -> None:
        """Recompute the estimates of time left when due (`wall`: the Unix clock the jobs' times are on); the
        summaries and rows whose figure moved go out with their team's next message."""
        moved = self.eta.refresh(now, wall)
        if moved is None:
            return
        for trajectory_id, eta in moved.trajectories.items():
            traj = self._summary_moved(trajectory_id)
            if traj is not None:
                traj.eta = eta
        for trajectory_id, analyses in moved.analyses.items():
            traj = self._summary_moved(trajectory_id)
            if traj is not None:
                traj.analyses = analyses
        for trajectory_id, (stuck, overruns) in moved.overruns.items():
            traj = self._summary_moved(trajectory_id)
            if traj is not None:
                traj.stuck, traj.overruns = stuck, self._submitters(trajectory_id, overruns)
        for submission_id, eta in moved.submissions.items():
            team_id = self.submissions.eta_changed(submission_id, eta)
            if team_id is not None:
                self._teams_to_send.add(team_id)

    def _submitters(self, trajectory_id: int, overruns: list[Overrun] | None) -> list[Overrun] | None:
        """Name on each stuck job the member whose submission it is (they are told, once, in their browser)."""
        if not overruns:
            return overruns
        submission_of = {job: submission for job, _, submission in self.eta.overruns.get(trajectory_id, ())}
        for overrun in overruns:
            submission = submission_of.get(overrun.id)
            agg = self.submissions.by_id.get(submission) if submission is not None else None
            if agg is not None and agg.record is not None:
                overrun.user = agg.record.user_id
        return overruns

    def _summary_moved(self, trajectory_id: int) -> TrajectoryAggregate | None:
        """A trajectory whose summary goes out again with its team's next message (None: not known here)."""
        traj = self.aggregates.trajectory(trajectory_id)
        if traj is not None:
            self.aggregates.team(traj.team_id).dirty.add(trajectory_id)
            self._teams_to_send.add(traj.team_id)
        return traj

    def mark_all_dirty(self) -> None:
        """Publish every team's whole state again (the bus lost what it held). Submission rows are not part of
        it: they are saved in PostgreSQL, and the pages read their windows again on the resync."""
        for team in self.aggregates.teams.values():
            team.dirty.update(team.trajectories)
            self._team_sent_at.pop(team.id, None)
        self._teams_to_send.update(self.aggregates.teams)

    def set_seqs(self, seqs: dict[str, int]) -> None:
        """Last sequences published before this relay took over (read from the bus)."""
        last = self.seqs.last
        for channel, seq in seqs.items():
            last.setdefault(channel, seq)

    def knows_seq(self, channel: str) -> bool:
        return channel in self.seqs.last

    # -- output

    def channels_without_seq(self) -> list[str]:
        """Channels about to publish whose last sequence is not known yet in this epoch."""
        wanted: set[str] = set(self.windows.pending)
        wanted.update(channels.team(t) for t in self._teams_with_changes())
        return [c for c in wanted if c not in self.seqs.last]

    def _teams_with_changes(self) -> list[int]:
        """The teams whose channel has summaries or submission rows to send (the others leave the set)."""
        teams, dirty_submissions = self.aggregates.teams, self.submissions.dirty
        out = []
        for team_id in self._teams_to_send:
            team = teams.get(team_id)
            if (team is not None and team.dirty) or dirty_submissions.get(team_id):
                out.append(team_id)
        if len(out) < len(self._teams_to_send):
            self._teams_to_send = set(out)
        return out

    def take_job_publications(self, now: float) -> list[Publication]:
        """The coalesced deltas of the job channels whose window has ended: one batch each (trajectory and
        team-jobs channels), split when large."""
        by_channel = self.windows.take_due(now)
        out: list[Publication] = []
        groups = self._take_groups(by_channel)
        for channel, batch in by_channel.items():
            if channel.startswith(channels.TRAJECTORY_PREFIX):
                self.deltas_taken += len(batch)  # every job is on one trajectory channel: counted once
            batch.sort(key=_job_order)
            chunks = [batch[start : start + MAX_JOBS_PER_BATCH] for start in range(0, len(batch), MAX_JOBS_PER_BATCH)]
            for i, chunk in enumerate(chunks):
                # The groups these jobs changed travel with the last batch of the cycle.
                self._publish_batch(channel, chunk, groups.get(channel) if i == len(chunks) - 1 else None, out)
        return out

    def _take_groups(self, publishing: dict[str, list[Job]]) -> dict[str, list[Group]]:
        """The changed groups of the trajectories about to publish (the others keep theirs for their batch)."""
        dirty, names = self.aggregates.dirty_groups, self._names
        out: dict[str, list[Group]] = {}
        for trajectory_id in list(dirty):
            pair = names.get(trajectory_id)
            channel = pair[0] if pair is not None else channels.trajectory(trajectory_id)
            if channel not in publishing:
                continue
            group_keys = dirty.pop(trajectory_id)
            traj = self.aggregates.trajectory(trajectory_id)
            if traj is not None:
                out[channel] = [traj.group(k) for k in sorted(group_keys, key=group_order)]
        return out

    def _publish_batch(self, channel: str, jobs: list[Job], groups: list[Group] | None, out: list[Publication]) -> None:
        """One batch message, halved until it fits the byte bound (jobs with long errors are big)."""
        seq = self.seqs.last.get(channel, 0) + 1
        message = Batch(channel=channel, seq=seq, cursor=make_cursor(self.epoch, seq), jobs=jobs, groups=groups)
        publication = self.seqs.publication(channel, seq, message)
        if len(publication.json) > MAX_BATCH_BYTES and len(jobs) > 1:
            half = len(jobs) // 2
            self._publish_batch(channel, jobs[:half], None, out)
            self._publish_batch(channel, jobs[half:], groups, out)
            return
        self.seqs.last[channel] = seq
        out.append(publication)

    def next_team_due(self) -> float | None:
        """When the earliest team with unsent changes may publish (on the adapter's monotonic clock)."""
        sent_at = self._team_sent_at
        return min((sent_at.get(t, float("-inf")) + TEAM_INTERVAL for t in self._teams_with_changes()), default=None)

    def next_due(self) -> float | None:
        """When the relay must cycle even with no new change: a held job channel or a team to publish, a wave to
        finish, estimates of time left to recompute."""
        due = [
            d
            for d in (self.windows.next_due(), self.next_team_due(), self.finishes.next_due(), self.eta.next_due())
            if d is not None
        ]
        return min(due) if due else None

    def take_team_publications(self, now: float) -> list[Publication]:
        out: list[Publication] = []
        sent_at = self._team_sent_at
        for team_id in self._teams_with_changes():
            if now >= sent_at.get(team_id, float("-inf")) + TEAM_INTERVAL:
                sent_at[team_id] = now
                out.append(self._team_publication(self.aggregates.team(team_id)))
        return out

    def _team_publication(self, team: TeamAggregate) -> Publication:
        channel = channels.team(team.id)
        seq = self.seqs.next(channel)
        summaries: list[TrajectorySummary] = []
        state_set: dict[str, bytes] = {}
        state_del: list[str] = []
        for trajectory_id in sorted(team.dirty):
            summary = team.trajectories[trajectory_id].summary()
            summaries.append(summary)
            key = f"{SUMMARY_STATE_PREFIX}{trajectory_id}"
            if summary.total:
                state_set[key] = msgspec.msgpack.encode(summary)
            else:
                state_del.append(key)  # nothing listed any more: it leaves the popover
        team.dirty.clear()
        summaries.sort(key=_recent_first)
        rows = self.submissions.take_rows(team.id)
        reload = len(rows) > MAX_ROWS_PER_SUMMARY
        message = Summary(
            channel=channel,
            seq=seq,
            cursor=make_cursor(self.epoch, seq),
            counts=team.counts,
            trajectories=summaries,
            total_trajectories=team.listed_trajectories(),
            submissions=None if reload or not rows else rows,
            reload_submissions=reload,
        )
        publication = self.seqs.publication(channel, seq, message)
        state_set["counts"] = msgspec.msgpack.encode(team.counts)
        state_set["total"] = str(message.total_trajectories).encode()
        publication.state_set = state_set
        publication.state_del = state_del or None
        return publication


def _job_order(job: Job) -> tuple[int, int]:
    return (job.frame if job.frame is not None else -1, job.id)


def _recent_first(summary: TrajectorySummary) -> float:
    return -summary.updated_at.timestamp() if summary.updated_at else 0.0
