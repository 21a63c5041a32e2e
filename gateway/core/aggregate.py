"""Per-trajectory and per-team aggregates kept exact from the captured old and new statuses.

No counter row that every writer must lock: the relay folds each captured change into these counts, and a
relay that starts rebuilds them from one consistent snapshot of the database.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from .grouping import TRANSFERS, Group, job_group, make_group
from .model import AnalysisEta, Counts, Job, Overrun, TrajectorySummary
from .submission import SubmissionRecord


class Change(msgspec.Struct, kw_only=True):
    """One captured change of one job, as the outbox holds it: the statuses before and after, and the job."""

    old_status: str | None  # None: not listed before the change
    new_status: str | None  # None: not listed after it (removed)
    job: Job
    # Already in the counts a relay loaded at takeover: replay the delta, do not count it twice.
    counted: bool = False


class GroupAggregate:
    __slots__ = ("counts", "timestep")

    def __init__(self, timestep: float | None = None) -> None:
        self.counts = Counts()
        self.timestep = timestep


class MembershipChange(msgspec.Struct, kw_only=True):
    """A user joined or left a team."""

    team_id: int
    user_id: int
    member: bool
    counted: bool = False


class OwnershipChange(msgspec.Struct, kw_only=True):
    """A channel moved to another team (a trajectory, by the platform): its old team's subscribers lose it."""

    channel: str
    team_id: int
    previous_team_id: int
    counted: bool = False


class MembershipsChanged(msgspec.Struct, frozen=True):
    """Membership changes the relay announces to every node (gateway.bus.announcements)."""

    changes: list[MembershipChange]


class OwnershipsChanged(msgspec.Struct, frozen=True):
    """Channels that changed team, announced to every node: their old team's subscriptions end."""

    moved: list[OwnershipChange]


class SubmissionChange(msgspec.Struct, kw_only=True):
    """A submission's record changed (its tasks' changes arrive as job changes)."""

    record: SubmissionRecord
    counted: bool = False


# What one outbox row reads as: a job's change, a submission's record, a membership, a channel's new owner.
AnyChange = Change | SubmissionChange | MembershipChange | OwnershipChange


class TrajectoryAggregate(msgspec.Struct, kw_only=True):
    id: int
    team_id: int
    name: str
    counts: Counts = msgspec.field(default_factory=Counts)
    updated_at: datetime | None = None
    groups: dict[str, GroupAggregate] = msgspec.field(default_factory=dict)
    # The estimated time left as last published (gateway.core.eta sets them; None: unknown or nothing left).
    eta: int | None = None
    analyses: list[AnalysisEta] | None = None
    stuck: int = 0  # its jobs running longer than usual, and the first of them (gateway.core.eta)
    overruns: list[Overrun] | None = None

    def active(self) -> int:
        return self.counts.active()

    def group(self, key: str) -> Group:
        agg = self.groups.get(key) or GroupAggregate()
        return make_group(key, agg.counts, agg.timestep)

    def count_group(self, key: str, status: str, n: int, timestep: float | None = None) -> None:
        agg = self.groups.get(key)
        if agg is None:
            agg = self.groups[key] = GroupAggregate(timestep)
        elif agg.timestep is None:
            agg.timestep = timestep
        agg.counts.add(status, n)
        if not agg.counts.total():
            del self.groups[key]

    def summary(self) -> TrajectorySummary:
        active = self.counts.active() > 0  # its figure goes the moment nothing is left, not at the next refresh
        return TrajectorySummary(
            id=self.id,
            name=self.name,
            completed=self.counts.completed,
            total=self.counts.total(),
            status=self.counts.status(),
            counts=self.counts.copy(),
            updated_at=self.updated_at,
            open=TRANSFERS in self.groups,
            eta=self.eta if active else None,
            analyses=self.analyses if active else None,
            stuck=self.stuck if active else 0,
            overruns=self.overruns if active else None,
        )


class TeamAggregate:
    """A team's counts and its trajectories' aggregates; remembers which summaries changed."""

    __slots__ = ("id", "counts", "trajectories", "dirty")

    def __init__(self, team_id: int) -> None:
        self.id = team_id
        self.counts = Counts()
        self.trajectories: dict[int, TrajectoryAggregate] = {}
        self.dirty: set[int] = set()

    def listed_trajectories(self) -> int:
        return sum(1 for t in self.trajectories.values() if t.counts.total())


class Aggregates:
    """Every team's aggregates. Applying a change is pure arithmetic on absolute counts."""

    def __init__(self) -> None:
        self.teams: dict[int, TeamAggregate] = {}
        self._trajectories: dict[int, TrajectoryAggregate] = {}
        self.dirty_groups: dict[int, set[str]] = {}  # per trajectory, groups changed this cycle

    def trajectory(self, trajectory_id: int) -> TrajectoryAggregate | None:
        return self._trajectories.get(trajectory_id)

    def team(self, team_id: int) -> TeamAggregate:
        team = self.teams.get(team_id)
        if team is None:
            team = self.teams[team_id] = TeamAggregate(team_id)
        return team

    def known(self, trajectory_id: int) -> bool:
        return trajectory_id in self._trajectories

    def forget(self, trajectory_id: int) -> None:
        """A trajectory that moved to another team: its next change registers it again, under its new team."""
        agg = self._trajectories.pop(trajectory_id, None)
        self.dirty_groups.pop(trajectory_id, None)
        if agg is None:
            return
        team = self.team(agg.team_id)
        team.trajectories.pop(trajectory_id, None)
        team.dirty.discard(trajectory_id)
        for status, n in agg.counts.as_dict().items():
            if n:
                team.counts.add(status, -n)

    def add_trajectory(self, agg: TrajectoryAggregate) -> None:
        """Register a trajectory (from the startup snapshot or a name looked up later)."""
        team = self.team(agg.team_id)
        team.trajectories[agg.id] = agg
        self._trajectories[agg.id] = agg
        for status, n in agg.counts.as_dict().items():
            if n:
                team.counts.add(status, n)

    def apply(self, change: Change) -> TrajectoryAggregate:
        job = change.job
        traj = self._trajectories.get(job.trajectory_id)
        if traj is None:  # the adapter registers names first; a stray id still counts
            traj = TrajectoryAggregate(id=job.trajectory_id, team_id=job.team_id, name=f"#{job.trajectory_id}")
            self.add_trajectory(traj)
        team = self.team(traj.team_id)
        key = job_group(job)
        dirty = self.dirty_groups.get(traj.id)
        if dirty is None:
            self.dirty_groups[traj.id] = {key}
        else:
            dirty.add(key)
        old, new = change.old_status, change.new_status
        if change.counted or old == new:
            pass  # counted already, or the same status: counts unchanged, only the last change moves
        else:
            if old is not None:
                traj.counts.add(old, -1)
                team.counts.add(old, -1)
                traj.count_group(key, old, -1)
            if new is not None:
                traj.counts.add(new, 1)
                team.counts.add(new, 1)
                traj.count_group(key, new, 1, job.timestep)
        changed_at = job.removed_at or job.updated_at
        if changed_at is not None and (traj.updated_at is None or changed_at > traj.updated_at):
            traj.updated_at = changed_at
        team.dirty.add(traj.id)
        return traj
