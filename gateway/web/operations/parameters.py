"""The query parameters several routes share: the activity's filters and pages, the Submissions page's view
and window, the trajectory lists' search and page."""

from __future__ import annotations

from typing import Any

from ...core.submission import SUBMISSION_STATUSES
from ...core.submission_window import DEFAULT_LIMIT, MAX_FILTER_VALUES, MAX_LIMIT, MAX_SEARCH, SORT_COLUMNS


def param(name: str, description: str, schema: dict[str, Any], many: bool = False) -> dict[str, Any]:
    if many:
        schema = {"type": "array", "items": schema, "maxItems": MAX_FILTER_VALUES}
        return {"name": name, "in": "query", "description": description, "schema": schema, "explode": True}
    return {"name": name, "in": "query", "description": description, "schema": schema}


# The activity's filters, and its keyset pages.
ACTIVITY = [
    param("person", "Only what this user did", {"type": "integer", "minimum": 1}),
    param("action", "Only this action (kill, remove_running, rotate_key, add_member ...)", {"type": "string"}),
    param("since", "Only from this time on (ISO 8601 with a time zone)", {"type": "string", "format": "date-time"}),
]
ACTIVITY_PAGE = [
    param("limit", "Rows a page", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}),
    param("after", "The `next` of the page before", {"type": "string"}),
]

# The view of the Submissions page: its filters and order (a window adds offset and limit).
VIEW = (
    param("sort", "the column to sort by", {"type": "string", "enum": list(SORT_COLUMNS), "default": "created_at"}),
    param("dir", "asc or desc (created_at sorts desc by default, the others asc)", {"enum": ["asc", "desc"]}),
    param("status", "only these statuses; repeat for each", {"enum": list(SUBMISSION_STATUSES)}, many=True),
    param("project", "only these projects; repeat for each", {"type": "string", "maxLength": MAX_SEARCH}, many=True),
    param("user", "only these users' submissions; repeat for each", {"type": "integer", "minimum": 1}, many=True),
    param(
        "q",
        "search: the job id, or a part of the title, project or user's name",
        {"type": "string", "maxLength": MAX_SEARCH},
    ),
)
OFFSET = param("offset", "rows to skip", {"type": "integer", "minimum": 0, "default": 0})
PAGE = (
    OFFSET,
    param("limit", "rows to answer", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}),
)
# The trajectory lists' limit defaults differ (cards 100, the popover 300): not stated here.
SEARCHED_PAGE = (
    param("q", "a part of the trajectory's name", {"type": "string", "maxLength": MAX_SEARCH}),
    OFFSET,
    param("limit", "rows to answer", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}),
)
