"""The batcher's messages that are not job deltas: a wave's finish (notices and a glow), presence and cluster
metrics on the team channel (gateway.core.batching hands them to the relay)."""

from __future__ import annotations

import msgspec

from . import channels
from .aggregate import Aggregates
from .finish import Finish, FinishTracker, every_job_completed
from .protocol import ClustersUpdate, Glow, Notice, PresenceUpdate, make_cursor
from .publication import Publication, Sequences
from .submission_rows import SubmissionRows
from .team import ClusterStats, Presence


class Extras:
    """Messages that are not job deltas: a wave's finish (a notice on its trajectory's channel and on its team's,
    for a clean finish a glow), presence and cluster metrics on the team channel."""

    def __init__(self, aggregates: Aggregates, seqs: Sequences, settle: float, submissions: SubmissionRows) -> None:
        self.aggregates = aggregates
        self.seqs = seqs
        self.submissions = submissions
        self.finishes = FinishTracker(settle)

    def take_finishes(self, now: float) -> list[Finish]:
        """Waves whose trajectory has had no active job for the settle time (silent ones included: the adapter
        closes them too, and publishes nothing for them)."""
        finishes = self.finishes.take_finished(now, {})
        by_id = self.submissions.by_id
        for finish in finishes:
            traj = self.aggregates.trajectory(finish.trajectory_id)
            if traj is not None:
                finish.team_id = traj.team_id
                finish.name = traj.name
                # The glow is for a trajectory whose every listed job completed, whatever this wave did.
                finish.glow = finish.glow and every_job_completed(traj.counts)
            users: set[int] = set()
            for submission_id in finish.submissions:
                agg = by_id.get(submission_id)
                if agg is not None and agg.record is not None and agg.record.user_id is not None:
                    users.add(agg.record.user_id)
            finish.users = sorted(users)
        return finishes

    def channels_for_finishes(self, finishes: list[Finish]) -> list[str]:
        wanted: set[str] = set()
        for f in finishes:
            if not f.silent:
                wanted.update((channels.trajectory(f.trajectory_id), channels.team(f.team_id)))
        return [c for c in wanted if c not in self.seqs.last]

    def finish_publications(self, finishes: list[Finish], markers: dict[tuple[int, int], str]) -> list[Publication]:
        """A notice on the trajectory channel (a panel, a tool following the trajectory) and the same on the team
        channel (every member's page, whichever panel is open), and for a clean finish a glow on the team channel.
        A silent finish (a person cut the wave short) publishes nothing."""
        out: list[Publication] = []
        seqs, epoch = self.seqs, self.seqs.epoch
        for f in finishes:
            if f.silent:
                continue
            team_channel = channels.team(f.team_id)
            for channel in (channels.trajectory(f.trajectory_id), team_channel):
                seq = seqs.next(channel)
                notice = Notice(
                    channel=channel,
                    seq=seq,
                    cursor=make_cursor(epoch, seq),
                    trajectory_id=f.trajectory_id,
                    wave=f.wave,
                    title=f.title,
                    level=f.level,
                    name=f.name,
                    users=f.users,
                )
                out.append(seqs.publication(channel, seq, notice))
            if f.glow:
                seq = seqs.next(team_channel)
                glow = Glow(
                    channel=team_channel,
                    seq=seq,
                    cursor=make_cursor(epoch, seq),
                    trajectory_id=f.trajectory_id,
                    wave=f.wave,
                )
                out.append(seqs.publication(team_channel, seq, glow))
            out[-1].marker = markers.get((f.trajectory_id, f.wave))  # set with the last of them: all went out
        return out

    def team_extra_publication(self, team_id: int, update: Presence | ClusterStats) -> Publication:
        """Presence or cluster metrics on the team channel, stored with the team's state for snapshots."""
        channel = channels.team(team_id)
        seq = self.seqs.next(channel)
        cursor = make_cursor(self.seqs.epoch, seq)
        if isinstance(update, Presence):
            message: PresenceUpdate | ClustersUpdate = PresenceUpdate(
                channel=channel, seq=seq, cursor=cursor, presence=update
            )
            field = "presence"
        else:
            message = ClustersUpdate(channel=channel, seq=seq, cursor=cursor, clusters=update)
            field = "clusters"
        publication = self.seqs.publication(channel, seq, message)
        publication.state_set = {field: msgspec.msgpack.encode(update)}
        return publication
