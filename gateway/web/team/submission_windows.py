"""The Submissions page's windows: `GET /api/teams/{id}/submissions` (a page of rows, sorted and filtered, with
the total), `.../submissions.csv` (every row of that view, streamed) and `.../projects` (the project filter).

The rows are those the relay saved (gateway.store.submission_rows), served as saved: no row is decoded here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ...core import submission_csv
from ...core.submission import SubmissionRow
from ...core.submission_window import BadWindow, Window, parse_window
from ...store import people, submission_rows
from ...store.reads import TooSlow
from ..http.answers import Projects, SubmissionWindowOut, answer
from ..http.client_gone import until_gone
from ..http.export_stream import ExportResponse, StreamCut
from ..http.guards import Refused, endpoint, member, path_id, runtime_of, user
from ..http.heavy import DEEP_OFFSET

_row_decoder = msgspec.json.Decoder(SubmissionRow)
RENDER_SLICE = 100  # rows rendered in one step of the event loop (a few ms)


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


def heavy(window: Window) -> bool:
    """A search, or a page past DEEP_OFFSET rows: a read that may cost PostgreSQL seconds."""
    return bool(window.search) or window.offset >= DEEP_OFFSET


def too_slow(window: Window) -> Refused:
    """The answer to a read PostgreSQL cancelled at GATEWAY_STATEMENT_TIMEOUT: the caller can narrow it."""
    if window.search:
        return Refused(422, "too_broad", "search too broad: narrow it (more characters, or a filter)")
    return Refused(422, "too_broad", "this page took too long to read: narrow the view with a filter")


@endpoint
async def team_submissions(request: Request) -> Response:
    team_id, window = await _team_window(request)
    runtime = runtime_of(request)
    user_id = user(request)
    read = submission_rows.window(runtime.pool, team_id, window, runtime.settings.statement_timeout)
    try:
        with runtime.heavy.slot(user_id) if heavy(window) else contextlib.nullcontext():
            total, exact, rows = await until_gone(request, read)
    except TooSlow:
        raise too_slow(window) from None
    return answer(
        SubmissionWindowOut(
            total=total,
            total_exact=exact,
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
    runtime = runtime_of(request)
    return answer(Projects(await submission_rows.projects(runtime.pool, team_id, runtime.settings.statement_timeout)))


@endpoint
async def team_submissions_csv(request: Request) -> Response:
    """Every row of the view (its filters and order, not only a page), streamed as CSV (gateway.core.submission_csv):
    read a page at a time, each page rendered in slices between which the event loop serves everyone else."""
    team_id, window = await _team_window(request, paged=False)
    runtime = runtime_of(request)
    pool, settings = runtime.pool, runtime.settings
    release = runtime.heavy.take(user(request), export=True)
    try:
        names = {m.id: m.name for m in await people.members(pool, team_id)}
        pages = submission_rows.export(pool, team_id, window, settings.statement_timeout)
        try:  # the first page here, so that a search too broad is answered 422, not cut
            first = await until_gone(request, anext(pages, []))
        except TooSlow:
            raise too_slow(window) from None
    except BaseException:
        release()
        raise

    async def lines() -> AsyncIterator[str]:
        yield submission_csv.header()
        page = first
        while page:
            for start in range(0, len(page), RENDER_SLICE):
                slice_ = page[start : start + RENDER_SLICE]
                yield "".join(submission_csv.row_record(_row_decoder.decode(text), names) for text in slice_)
                await asyncio.sleep(0)  # a send that need not wait does not yield: the loop serves others here
            try:
                page = await anext(pages, [])
            except TooSlow:
                raise StreamCut(f"a page took longer than {settings.statement_timeout:g} s to read") from None

    filename = f"submissions-team-{team_id}.csv"
    return ExportResponse(
        lines(),
        done=release,
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
