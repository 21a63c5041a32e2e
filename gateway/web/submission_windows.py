"""The Submissions page's windows: `GET /api/teams/{id}/submissions` (a page of rows, sorted and filtered, with
the total), `.../submissions.csv` (every row of that view, streamed) and `.../projects` (the project filter).

The rows are those the relay saved (gateway.store.submission_rows), served as saved: no row is decoded here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..core import submission_csv
from ..core.submission import SubmissionRow
from ..core.submission_window import BadWindow, Window, parse_window
from ..store import people, submission_rows
from .answers import Projects, SubmissionWindowOut, answer
from .guards import Refused, endpoint, member, path_id, runtime_of, user

_row_decoder = msgspec.json.Decoder(SubmissionRow)


async def _team_window(request: Request, paged: bool = True) -> tuple[int, Window]:
    team_id = path_id(request)
    user_id = user(request)
    query = request.query_params
    try:
        window = parse_window({k: query.getlist(k) for k in query}, paged)
    except BadWindow as bad:
        raise Refused(422, "invalid", str(bad)) from None
    await member(request, user_id, team_id)
    return team_id, window


@endpoint
async def team_submissions(request: Request) -> Response:
    team_id, window = await _team_window(request)
    total, rows = await submission_rows.window(runtime_of(request).pool, team_id, window)
    return answer(
        SubmissionWindowOut(
            total=total,
            offset=window.offset,
            limit=window.limit,
            sort=window.sort,
            dir="desc" if window.descending else "asc",
            rows=[msgspec.Raw(r.encode()) for r in rows],
        )
    )


@endpoint
async def team_projects(request: Request) -> Response:
    team_id = path_id(request)
    await member(request, user(request), team_id)
    return answer(Projects(await submission_rows.projects(runtime_of(request).pool, team_id)))


@endpoint
async def team_submissions_csv(request: Request) -> Response:
    """Every row of the view (its filters and order, not only a page), streamed as CSV (gateway.core.submission_csv)."""
    team_id, window = await _team_window(request, paged=False)
    pool = runtime_of(request).pool
    names = {m.id: m.name for m in await people.members(pool, team_id)}

    async def lines() -> AsyncIterator[str]:
        yield submission_csv.header()
        async for chunk in submission_rows.export(pool, team_id, window):
            yield "".join(submission_csv.row_record(_row_decoder.decode(text), names) for text in chunk)

    filename = f"submissions-team-{team_id}.csv"
    return StreamingResponse(
        lines(),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
