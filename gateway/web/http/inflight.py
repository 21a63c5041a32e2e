"""Actions in flight, bounded per user and per team: each may wait seconds for its clusters to confirm, so
one person's burst must not take what every other team needs (429 past the bound, the action not started)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ...core.ratelimit import Concurrency
from .refusals import Refused


class ActionLimits:
    def __init__(self, per_user: int, per_team: int, retry_after: float) -> None:
        self.users = Concurrency(per_user)
        self.teams = Concurrency(per_team)
        self.retry_after = retry_after  # about one command timeout: by then a slot has freed

    @contextlib.contextmanager
    def slot(self, user_id: int, team_id: int) -> Iterator[None]:
        if not self.users.acquire(user_id):
            raise Refused(
                429,
                "too_many_actions",
                f"at most {self.users.limit} of your actions at once: wait for one to finish",
                self.retry_after,
            )
        if not self.teams.acquire(team_id):
            self.users.release(user_id)
            raise Refused(
                429,
                "too_many_actions",
                f"at most {self.teams.limit} actions of this team at once: wait for one to finish",
                self.retry_after,
            )
        try:
            yield
        finally:
            self.users.release(user_id)
            self.teams.release(team_id)
