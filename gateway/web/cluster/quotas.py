"""What a team's clusters may create, per node: jobs, and the trajectories, analyses and submissions they register,
each a budget of so many an hour (GATEWAY_MAX_NEW_JOBS_PER_HOUR, GATEWAY_MAX_NEW_TRAJECTORIES_PER_HOUR).

Counted in each node's memory, not in PostgreSQL: a shared count would be a row every ingest of a team locks
until it commits, and the clusters of a team would then write one at a time. With N nodes behind a balancer a
team may create up to N times its budget; the operator sets it knowing N (docs/operations.md, "Bounds").

A request spends its rows before it writes, all or none (a batch past what is left is refused whole with 429
and `Retry-After`, nothing written), and gets them back when the write fails.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from ...core.ratelimit import KeyedRate
from ..http.refusals import Refused

HOUR = 3600.0

Kind = Literal["jobs", "trajectories"]

_SETTING = {"jobs": "GATEWAY_MAX_NEW_JOBS_PER_HOUR", "trajectories": "GATEWAY_MAX_NEW_TRAJECTORIES_PER_HOUR"}
_WHAT = {"jobs": "jobs", "trajectories": "trajectories, analyses and submissions"}


class Creations:
    """Per team: a budget of `per_hour` rows of each kind an hour on average, in bursts of an hour's worth; a kind
    whose budget is 0 is not limited."""

    def __init__(self, jobs_per_hour: int, trajectories_per_hour: int) -> None:
        self.limits: dict[str, KeyedRate | None] = {
            "jobs": KeyedRate(jobs_per_hour / HOUR, jobs_per_hour) if jobs_per_hour > 0 else None,
            "trajectories": (
                KeyedRate(trajectories_per_hour / HOUR, trajectories_per_hour) if trajectories_per_hour > 0 else None
            ),
        }

    @contextmanager
    def spending(self, kind: Kind, team_id: int, count: int) -> Iterator[None]:
        """Spend `count` of the team's rows of `kind` for the write inside; 429 when they are not there, and
        given back when the write fails."""
        limit = self.limits[kind]
        if limit is None or count <= 0:
            yield
            return
        wait = limit.wait(team_id, time.monotonic(), count)
        if wait == math.inf:
            raise Refused(
                422, "invalid", f"{kind}: a request may create at most {limit.burst:.0f} {kind} ({_SETTING[kind]})"
            )
        if wait:
            raise Refused(
                429,
                "quota_exceeded",
                f"this team's clusters may create {limit.burst:.0f} {_WHAT[kind]} an hour on this node"
                f" ({_SETTING[kind]}): nothing was written; {count} more fit in {math.ceil(wait)} s",
                retry_after=math.ceil(wait),
            )
        try:
            yield
        except BaseException:
            limit.give_back(team_id, count)
            raise
