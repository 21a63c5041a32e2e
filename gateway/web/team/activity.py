"""Who did what: `GET /api/teams/<id>/activity` (JSON, keyset pages, newest first) and `.../activity.csv` (every
row the filters take), for the team's owners and admins only (gateway.store.activity).

Filters: `person` (a user id), `action` (e.g. `kill`, `remove_running`, `rotate_key`), `since` (ISO 8601); pages:
`limit` (1-1000, 100 by default) and `after` (the `next` of the page before).
"""

from __future__ import annotations

import csv
import io
from datetime import datetime
from typing import NamedTuple

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...core import roles
from ...store import activity
from ..http.answers import answer
from ..http.guards import Refused, endpoint, may, path_id, runtime_of, user

CSV_PAGE = 1000


class ActivityEntry(msgspec.Struct):
    """One action: who (`user_id` null for the command line or an automation, `actor` names it), what, how many,
    on which clusters, when, and what it named (`scope`, e.g. `trajectory:12`, `submission:3 submission:4`)."""

    id: int
    at: datetime
    user_id: int | None
    actor: str
    action: str
    count: int
    clusters: list[str]
    scope: str


class ActivityPage(msgspec.Struct):
    """A page of the team's activity, newest first; `next`: the `after` of the next page (null: the last)."""

    entries: list[ActivityEntry]
    next: str | None


class Filters(NamedTuple):
    person: int | None
    action: str | None
    since: datetime | None


def _filters(request: Request) -> Filters:
    q = request.query_params
    person = q.get("person")
    if person is not None and not _whole(person, 2**63 - 1):
        raise Refused(422, "invalid", f"person: {person!r} is not a user id")
    action = q.get("action") or None
    if action is not None and not (action.isascii() and action.replace("_", "").isalpha()):
        raise Refused(422, "invalid", f"action: {action!r} is no action's name (e.g. kill, remove_running)")
    since = q.get("since")
    return Filters(None if person is None else int(person), action, None if since is None else _time("since", since))


def _whole(raw: str, most: int) -> bool:
    """ASCII digits only: int() reads other scripts' digits too."""
    return raw.isascii() and raw.isdigit() and 1 <= int(raw) <= most


def _time(name: str, raw: str) -> datetime:
    try:
        at = datetime.fromisoformat(raw)
    except ValueError:
        raise Refused(422, "invalid", f"{name}: {raw!r} is not an ISO 8601 time") from None
    except OverflowError:
        raise Refused(422, "invalid", f"{name}: {raw!r} is out of range") from None
    if at.tzinfo is None:
        raise Refused(422, "invalid", f"{name}: {raw!r} needs a time zone (e.g. Z)")
    return at


def _after(raw: str | None) -> tuple[datetime, int] | None:
    if raw is None:
        return None
    at, _, row_id = raw.rpartition("/")
    if not _whole(row_id, 2**63 - 1):
        raise Refused(422, "invalid", f"after: {raw!r} is not a page's next")
    return _time("after", at), int(row_id)


def _limit(raw: str | None) -> int:
    if raw is None:
        return 100
    if not _whole(raw, 1000):
        raise Refused(422, "invalid", f"limit: {raw!r} is not a whole number from 1 to 1000")
    return int(raw)


async def _team(request: Request) -> int:
    team_id = path_id(request)
    await may(request, user(request), team_id, roles.AUDIT)
    return team_id


@endpoint
async def team_activity(request: Request) -> Response:
    filters = _filters(request)
    limit = _limit(request.query_params.get("limit"))
    after = _after(request.query_params.get("after"))
    team_id = await _team(request)
    rows = await activity.page(runtime_of(request).pool, team_id, limit, after, *filters)
    last = rows[-1] if len(rows) == limit else None
    entries = [ActivityEntry(r.id, r.at, r.user_id, r.actor, r.action, r.count, r.clusters, r.scope) for r in rows]
    return answer(ActivityPage(entries, None if last is None else f"{last.at.isoformat()}/{last.id}"))


@endpoint
async def team_activity_csv(request: Request) -> Response:
    filters = _filters(request)
    team_id = await _team(request)
    pool = runtime_of(request).pool
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "at", "user_id", "actor", "action", "count", "clusters", "scope"])
    after = None
    while True:
        rows = await activity.page(pool, team_id, CSV_PAGE, after, *filters)
        for r in rows:
            writer.writerow(
                [r.id, r.at.isoformat(), r.user_id or "", r.actor, r.action, r.count, " ".join(r.clusters), r.scope]
            )
        if len(rows) < CSV_PAGE:
            break
        after = (rows[-1].at, rows[-1].id)
    return Response(
        out.getvalue(),
        media_type="text/csv; charset=utf-8",
        headers={"content-disposition": f'attachment; filename="team-{team_id}-activity.csv"'},
    )
