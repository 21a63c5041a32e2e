"""A window of the Submissions page, without I/O: what the page may ask for (sort, filters, search, offset) and
the checks that turn a query string into it, each refusal naming its parameter.

The store (gateway.store.submission_rows) turns a window into SQL; every sort key here has an index there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .submission import SUBMISSION_STATUSES

# The page's columns that sort, each the projection's column of the same meaning (USER sorts by name).
SORT_COLUMNS = {
    "id": "id",
    "user": "user_name",
    "status": "status",
    "project": "project",
    "title": "title",
    "priority": "priority",
    "cores": "cores",
    "memory_gb": "memory_gb",
    "preemptible": "preemptible",
    "progress": "progress",
    "tasks": "tasks",
    "avg_frame": "avg_frame",
    "created_at": "created_at",
}
DEFAULT_LIMIT = 100
MAX_LIMIT = 500
MAX_SEARCH = 200
MAX_FILTER_VALUES = 20
# ASCII digits only: str.isdigit() also takes "²" (int() refuses it) and "١" (int() reads it); at most 18, so that
# int() is cheap and the value fits a bigint.
_WHOLE = re.compile(r"[0-9]{1,18}")


def whole_number(text: str) -> int | None:
    """`text` as a whole number written in ASCII digits (at most 18), or None."""
    return int(text) if _WHOLE.fullmatch(text) else None


class BadWindow(ValueError):
    """A query the page cannot mean: `parameter` names what is wrong."""

    def __init__(self, parameter: str, message: str) -> None:
        super().__init__(f"{parameter}: {message}")
        self.parameter = parameter


@dataclass(frozen=True)
class Window:
    sort: str = "created_at"
    descending: bool = True
    statuses: tuple[str, ...] = ()
    projects: tuple[str, ...] = ()
    users: tuple[int, ...] = ()
    search: str = ""
    offset: int = 0
    limit: int = DEFAULT_LIMIT

    @property
    def column(self) -> str:
        return SORT_COLUMNS[self.sort]

    @property
    def search_id(self) -> int | None:
        """The row id a search also finds when it is one written in digits."""
        return whole_number(self.search)


def _int(params: Mapping[str, Sequence[str]], name: str, default: int, low: int, high: int) -> int:
    values = params.get(name) or ()
    if not values:
        return default
    value = whole_number(values[-1])
    if value is None or not low <= value <= high:
        raise BadWindow(name, f"expected a whole number from {low} to {high}")
    return value


def _many(params: Mapping[str, Sequence[str]], name: str) -> tuple[str, ...]:
    values = tuple(v for v in params.get(name) or () if v != "")
    if len(values) > MAX_FILTER_VALUES:
        raise BadWindow(name, f"at most {MAX_FILTER_VALUES} values")
    for value in values:
        _text(name, value)
    return values


def _user_ids(params: Mapping[str, Sequence[str]]) -> tuple[int, ...]:
    ids = []
    for raw in _many(params, "user"):
        value = whole_number(raw)
        if value is None:
            raise BadWindow("user", "expected a user id")
        ids.append(value)
    return tuple(ids)


def _text(name: str, value: str) -> str:
    """A text a person typed: PostgreSQL's text holds no NUL, and a search is at most MAX_SEARCH characters."""
    if "\x00" in value:
        raise BadWindow(name, "contains a NUL character")
    if len(value) > MAX_SEARCH:
        raise BadWindow(name, f"at most {MAX_SEARCH} characters")
    return value


def parse_window(params: Mapping[str, Sequence[str]], paged: bool = True) -> Window:
    """A window from query parameters (each a list of values, as repeated in the query string):
    `sort`, `dir` (asc or desc), `status`, `project`, `user` (repeatable), `q`, `offset`, `limit`."""
    sort = (params.get("sort") or ["created_at"])[-1]
    if sort not in SORT_COLUMNS:
        raise BadWindow("sort", f"expected one of {', '.join(SORT_COLUMNS)}")
    direction = (params.get("dir") or ["desc" if sort == "created_at" else "asc"])[-1]
    if direction not in ("asc", "desc"):
        raise BadWindow("dir", "expected asc or desc")
    statuses = _many(params, "status")
    for status in statuses:
        if status not in SUBMISSION_STATUSES:
            raise BadWindow("status", f"unknown status {status!r}")
    users = _user_ids(params)
    projects = _many(params, "project")
    page = parse_page(params) if paged else Page(search=_search(params), limit=0)
    return Window(
        sort=sort,
        descending=direction == "desc",
        statuses=statuses,
        projects=projects,
        users=users,
        search=page.search,
        offset=page.offset,
        limit=page.limit,
    )


@dataclass(frozen=True)
class Page:
    """A page of a list searched by name (the dashboard's cards, the popover's trajectories)."""

    search: str = ""
    offset: int = 0
    limit: int = DEFAULT_LIMIT


def parse_page(params: Mapping[str, Sequence[str]], default_limit: int = DEFAULT_LIMIT) -> Page:
    """`q`, `offset` and `limit` (1 to 500) from query parameters."""
    return Page(
        search=_search(params),
        offset=_int(params, "offset", 0, 0, 10**9),
        limit=_int(params, "limit", default_limit, 1, MAX_LIMIT),
    )


def _search(params: Mapping[str, Sequence[str]]) -> str:
    return _text("q", (params.get("q") or [""])[-1].strip())


def search_matches(search: str, *texts: str) -> bool:
    """Whether a part of any of `texts` is `search`, case aside (as ILIKE '%search%')."""
    needle = search.casefold()
    return any(needle in t.casefold() for t in texts)


# A search's words: runs of letters and digits (what sql/025 keeps of a title, a project and a user's name before
# PostgreSQL splits them into words); anything else separates words.
_WORD = re.compile(r"[^\W_]+")


def words_query(search: str) -> str | None:
    """`search` as a tsquery of PostgreSQL's 'simple' configuration, as a search box reads it while a person types:
    every word a word of the row, the last one the beginning of one (`'copper' & 'gra':*`); None for a search
    without a letter or a digit, which finds no text."""
    words = _WORD.findall(search)
    if not words:
        return None
    return " & ".join([*(f"'{w}'" for w in words[:-1]), f"'{words[-1]}':*"])


def like_pattern(search: str) -> str:
    """`search` as an ILIKE pattern that matches it anywhere, its own % _ and \\ taken literally."""
    escaped = search.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
