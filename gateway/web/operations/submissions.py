"""The Submissions page: its windows of rows, the CSV export, the projects, the saved views."""

from __future__ import annotations

from ...core.saved_views import DefaultIn, SavedViews, ViewIn
from ..answers import Created, Projects, SubmissionWindow
from .operation import Operation
from .parameters import PAGE, VIEW

ROUTES: list[Operation] = [
    Operation(
        "get",
        "/api/teams/{id}/submissions",
        "teamSubmissions",
        "teams",
        "A window of the Submissions page: rows sorted, filtered and searched on the server, with the total",
        "user",
        None,
        SubmissionWindow,
        parameters=VIEW + PAGE,
    ),
    Operation(
        "get",
        "/api/teams/{id}/submissions.csv",
        "exportSubmissions",
        "teams",
        "Every row of a Submissions view (its filters and order), as CSV with the page's columns, streamed",
        "user",
        None,
        SubmissionWindow,
        parameters=VIEW,
        media="text/csv",
    ),
    Operation(
        "get",
        "/api/teams/{id}/projects",
        "teamProjects",
        "teams",
        "The team's projects, for the Submissions page's filter",
        "user",
        None,
        Projects,
    ),
    Operation(
        "get",
        "/api/teams/{id}/views",
        "listViews",
        "teams",
        "The Submissions page's saved views the caller sees: their own and those shared with the team",
        "user",
        None,
        SavedViews,
    ),
    Operation(
        "post",
        "/api/teams/{id}/views",
        "createView",
        "teams",
        "Save the Submissions page's filters, sort and columns as a named view",
        "user",
        ViewIn,
        Created,
        conflict="the caller has 100 views of their own in the team already",
    ),
    Operation(
        "put",
        "/api/teams/{id}/views/default",
        "chooseDefaultView",
        "teams",
        "The view the Submissions page opens on for the caller (null: the page's own)",
        "user",
        DefaultIn,
        None,
        not_found="no view of that id the caller sees in this team",
    ),
    Operation(
        "put",
        "/api/teams/{id}/views/{view}",
        "updateView",
        "teams",
        "Replace a saved view: its author, or an owner or admin of the team for a shared one",
        "user",
        ViewIn,
        None,
        not_found="no view of that id the caller sees in this team (another team's, or another member's private one)",
    ),
    Operation(
        "delete",
        "/api/teams/{id}/views/{view}",
        "deleteView",
        "teams",
        "Delete a saved view: its author, or an owner or admin of the team for a shared one",
        "user",
        None,
        None,
        not_found="no view of that id the caller sees in this team (another team's, or another member's private one)",
    ),
]
