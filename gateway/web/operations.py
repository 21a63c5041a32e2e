"""Every HTTP route under /api as the OpenAPI document describes it (gateway.web.schema turns this into the
document; tests/unit/test_schema.py holds it equal to the app's routes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.control import ActionPreview, ActionResult, Confirmation, SubmissionsAction
from ..core.ingest import IngestBatch, IngestResponse, NewAnalysis, NewSubmission, NewTrajectory, SubmissionUpdate
from ..core.instance_types import InstanceTypes, Offered
from ..core.submission import SUBMISSION_STATUSES
from ..core.submission_window import DEFAULT_LIMIT, MAX_FILTER_VALUES, MAX_LIMIT, MAX_SEARCH, SORT_COLUMNS
from ..core.team import MetricsReport
from .activity import ActivityPage
from .answers import (
    Account,
    ActiveTrajectories,
    Analyses,
    ConfirmationTaken,
    Created,
    Done,
    Me,
    Members,
    Projects,
    Renewed,
    SubmissionWindow,
    Trajectories,
    TrajectoryRow,
    Users,
)
from .platform_admin import AdminTeams, AdminUsers, Made, NewName, Removed
from .team_admin import (
    ClusterKey,
    ClusterMade,
    ClusterRemoved,
    MemberChange,
    MemberRemoved,
    Membership,
    NewCluster,
    TeamClusters,
)


def _param(name: str, description: str, schema: dict[str, Any], many: bool = False) -> dict[str, Any]:
    if many:
        schema = {"type": "array", "items": schema, "maxItems": MAX_FILTER_VALUES}
        return {"name": name, "in": "query", "description": description, "schema": schema, "explode": True}
    return {"name": name, "in": "query", "description": description, "schema": schema}


# The activity's filters, and its keyset pages.
ACTIVITY = [
    _param("person", "Only what this user did", {"type": "integer", "minimum": 1}),
    _param("action", "Only this action (kill, remove_running, rotate_key, add_member ...)", {"type": "string"}),
    _param("since", "Only from this time on (ISO 8601 with a time zone)", {"type": "string", "format": "date-time"}),
]
ACTIVITY_PAGE = [
    _param("limit", "Rows a page", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100}),
    _param("after", "The `next` of the page before", {"type": "string"}),
]

# The view of the Submissions page: its filters and order (a window adds offset and limit).
VIEW = (
    _param("sort", "the column to sort by", {"type": "string", "enum": list(SORT_COLUMNS), "default": "created_at"}),
    _param("dir", "asc or desc (created_at sorts desc by default, the others asc)", {"enum": ["asc", "desc"]}),
    _param("status", "only these statuses; repeat for each", {"enum": list(SUBMISSION_STATUSES)}, many=True),
    _param("project", "only these projects; repeat for each", {"type": "string", "maxLength": MAX_SEARCH}, many=True),
    _param("user", "only these users' submissions; repeat for each", {"type": "integer", "minimum": 1}, many=True),
    _param(
        "q",
        "search: the job id, or a part of the title, project or user's name",
        {"type": "string", "maxLength": MAX_SEARCH},
    ),
)
OFFSET = _param("offset", "rows to skip", {"type": "integer", "minimum": 0, "default": 0})
PAGE = (
    OFFSET,
    _param(
        "limit", "rows to answer", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}
    ),
)
# The trajectory lists' limit defaults differ (cards 100, the popover 300): not stated here.
SEARCHED_PAGE = (
    _param("q", "a part of the trajectory's name", {"type": "string", "maxLength": MAX_SEARCH}),
    OFFSET,
    _param("limit", "rows to answer", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}),
)


@dataclass(frozen=True)
class Operation:
    """One HTTP route under /api, as documented: who may call it, what it reads and what it answers."""

    method: str
    path: str
    operation_id: str
    tag: str
    summary: str
    who: str  # cluster | user | anyone
    request: Any = None  # the JSON body's Struct
    answer: Any = None  # the 200 body's Struct; None: 204, no body
    not_found: str | None = None  # when it can answer 404
    conflict: str | None = None  # when it can answer 409
    query: tuple[tuple[str, str], ...] = ()  # (name, description) of repeatable integer query parameters
    parameters: tuple[dict[str, Any], ...] = ()  # other query parameters, as OpenAPI parameter objects
    media: str = "application/json"  # the 200 body's type (text/csv: a string, not the Struct's JSON)


ROUTES: list[Operation] = [
    Operation(
        "post",
        "/api/ingest/jobs",
        "ingestJobs",
        "ingest",
        "Create jobs and report on them, all or nothing",
        "cluster",
        IngestBatch,
        IngestResponse,
    ),
    Operation(
        "post",
        "/api/ingest/trajectories",
        "registerTrajectory",
        "ingest",
        "Register a trajectory this cluster stores",
        "cluster",
        NewTrajectory,
        Created,
    ),
    Operation(
        "post",
        "/api/ingest/analyses",
        "registerAnalysis",
        "ingest",
        "Register an analysis of a pipeline run",
        "cluster",
        NewAnalysis,
        Created,
    ),
    Operation(
        "post",
        "/api/ingest/submissions",
        "submitWork",
        "ingest",
        "Submit a batch of work",
        "cluster",
        NewSubmission,
        Created,
    ),
    Operation(
        "post",
        "/api/ingest/submissions/{id}",
        "updateSubmission",
        "ingest",
        "Move a submission's data along, or mark it downloaded",
        "cluster",
        SubmissionUpdate,
        None,
        "no such submission of this cluster (another cluster's, another team's or none: the same answer)",
        conflict="a staging the submission's lifecycle does not reach from where it is (the message names both)",
    ),
    Operation(
        "post",
        "/api/ingest/metrics",
        "reportMetrics",
        "ingest",
        "Report CPU, Memory, Disk and Network",
        "cluster",
        MetricsReport,
        None,
    ),
    Operation(
        "post",
        "/api/ingest/confirmations",
        "confirmCommand",
        "ingest",
        "Confirm the jobs of a command (from the cluster's feed) the cluster acted on; a repeat changes nothing",
        "cluster",
        Confirmation,
        ConfirmationTaken,
        "no such command of this cluster (another cluster's or none: the same answer)",
    ),
    Operation(
        "post",
        "/api/trajectories/{id}/remove-running",
        "removeRunningJobs",
        "actions",
        "Remove Running Jobs",
        "user",
        None,
        ActionResult,
    ),
    Operation(
        "get",
        "/api/trajectories/{id}/remove-running/preview",
        "previewRemoveRunningJobs",
        "actions",
        "What Remove Running Jobs would stop, per cluster, for a confirmation; nothing is done",
        "user",
        None,
        ActionPreview,
    ),
    Operation(
        "post",
        "/api/trajectories/{id}/retry-failed",
        "retryFailedJobs",
        "actions",
        "Retry Failed Jobs",
        "user",
        None,
        ActionResult,
    ),
    Operation(
        "post",
        "/api/analyses/{id}/retry-failed",
        "retryFailedFrames",
        "actions",
        "Retry Failed Frames of an analysis",
        "user",
        None,
        ActionResult,
    ),
    Operation(
        "post",
        "/api/submissions/actions",
        "actOnSubmissions",
        "actions",
        "An action of the Submissions page",
        "user",
        SubmissionsAction,
        ActionResult,
    ),
    Operation(
        "post",
        "/api/submissions/actions/preview",
        "previewSubmissionsAction",
        "actions",
        "What a task action would take (tasks per cluster), for a confirmation; nothing is done",
        "user",
        SubmissionsAction,
        ActionPreview,
    ),
    Operation(
        "get",
        "/api/submissions/instance-types",
        "submissionInstanceTypes",
        "actions",
        "The instance types Edit / Instance Type may choose for the submissions named by `?submission=`",
        "user",
        None,
        Offered,
        query=(("submission", "a selected submission's id; repeat for each (at most 1,000)"),),
    ),
    Operation(
        "post",
        "/api/ingest/instance-types",
        "declareInstanceTypes",
        "ingest",
        "Declare the instance types this cluster offers (replaces its list)",
        "cluster",
        InstanceTypes,
        None,
    ),
    Operation(
        "get",
        "/api/trajectories/{id}",
        "trajectory",
        "teams",
        "One trajectory of the caller's teams by id, whatever its age (a panel opened from a link is titled by it)",
        "user",
        None,
        TrajectoryRow,
    ),
    Operation(
        "get",
        "/api/trajectories/{id}/analyses",
        "trajectoryAnalyses",
        "actions",
        "The analysis listing: a trajectory's analyses and their frames, newest first",
        "user",
        None,
        Analyses,
    ),
    Operation(
        "delete",
        "/api/analyses/{id}",
        "deleteAnalysis",
        "actions",
        "Delete analysis: stop its jobs through their clusters and delete its results",
        "user",
        None,
        ActionResult,
        "no such analysis, or it was deleted",
    ),
    Operation("get", "/api/me", "me", "session", "The signed-in user and their teams", "user", None, Me),
    Operation(
        "get",
        "/api/teams/{id}/members",
        "teamMembers",
        "teams",
        "My Team: members and who is online; the team's clusters by name (job rows name them)",
        "user",
        None,
        Members,
    ),
    Operation(
        "post",
        "/api/teams/{id}/members",
        "addMember",
        "teams",
        "Make a user (by id or name) a member with a role, or change their role; idempotent (owners and admins; "
        "only an owner makes or unmakes an owner; the last owner stays)",
        "user",
        MemberChange,
        Membership,
        "no such user",
        "the change would leave the team without an owner",
    ),
    Operation(
        "delete",
        "/api/teams/{id}/members/{user}",
        "removeMember",
        "teams",
        "Remove a member (owners and admins; only an owner removes an owner; the last owner stays); idempotent",
        "user",
        None,
        MemberRemoved,
        conflict="the member is the team's last owner",
    ),
    Operation(
        "get",
        "/api/teams/{id}/clusters",
        "teamClusters",
        "teams",
        "The team's clusters, and the caller's role in the team",
        "user",
        None,
        TeamClusters,
    ),
    Operation(
        "post",
        "/api/teams/{id}/clusters",
        "addCluster",
        "teams",
        "Add a cluster, its ingest key shown this once; a cluster of that name is found again, with no key "
        "(owners and admins)",
        "user",
        NewCluster,
        ClusterMade,
    ),
    Operation(
        "post",
        "/api/teams/{id}/clusters/{cluster}/key",
        "rotateClusterKey",
        "teams",
        "A new ingest key for the cluster, shown this once: its previous key stops working now (owners and admins)",
        "user",
        None,
        ClusterKey,
        "no such cluster in this team",
    ),
    Operation(
        "delete",
        "/api/teams/{id}/clusters/{cluster}",
        "removeCluster",
        "teams",
        "Remove a cluster (its key stops working); idempotent; with jobs only when with_jobs=true (owners and admins)",
        "user",
        None,
        ClusterRemoved,
        conflict="the cluster still holds jobs and with_jobs is not true",
        parameters=(_param("with_jobs", "remove the cluster's jobs with it", {"type": "boolean", "default": False}),),
    ),
    Operation(
        "get",
        "/api/admin/teams",
        "adminTeams",
        "admin",
        "Every team (a platform administrator's token)",
        "user",
        None,
        AdminTeams,
    ),
    Operation(
        "post",
        "/api/admin/teams",
        "adminCreateTeam",
        "admin",
        "Create a team, or find the one of that name (`created` false); a platform administrator's token",
        "user",
        NewName,
        Made,
    ),
    Operation(
        "get",
        "/api/admin/users",
        "adminUsers",
        "admin",
        "Every user (a platform administrator's token)",
        "user",
        None,
        AdminUsers,
    ),
    Operation(
        "post",
        "/api/admin/users",
        "adminCreateUser",
        "admin",
        "Create a user, or find the one of that name (`created` false); a platform administrator's token",
        "user",
        NewName,
        Made,
    ),
    Operation(
        "delete",
        "/api/admin/teams/{id}",
        "adminRemoveTeam",
        "admin",
        "Remove a team with its members, clusters and trajectories; idempotent; with jobs only when with_jobs=true",
        "user",
        None,
        Removed,
        conflict="the team still holds jobs and with_jobs is not true",
        parameters=(_param("with_jobs", "remove the team's jobs with it", {"type": "boolean", "default": False}),),
    ),
    Operation(
        "delete",
        "/api/admin/users/{id}",
        "adminRemoveUser",
        "admin",
        "Remove a user (their memberships and sessions end); idempotent",
        "user",
        None,
        Removed,
    ),
    Operation(
        "get",
        "/api/teams/{id}/trajectories",
        "teamTrajectories",
        "teams",
        "A page of the team's trajectories (the dashboard's cards), newest first, searched by name",
        "user",
        None,
        Trajectories,
        parameters=SEARCHED_PAGE,
    ),
    Operation(
        "get",
        "/api/teams/{id}/trajectories/active",
        "teamActiveTrajectories",
        "teams",
        "A page of the trajectories with jobs listed (the Jobs popover), most recent change first, searched by name",
        "user",
        None,
        ActiveTrajectories,
        parameters=SEARCHED_PAGE,
    ),
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
        "/api/teams/{id}/activity",
        "teamActivity",
        "teams",
        "Who did what: the team's actions, membership changes and key rotations, newest first (owners and admins)",
        "user",
        None,
        ActivityPage,
        parameters=tuple(ACTIVITY + ACTIVITY_PAGE),
    ),
    Operation(
        "get",
        "/api/teams/{id}/activity.csv",
        "exportActivity",
        "teams",
        "Every activity row the filters take, as CSV (owners and admins)",
        "user",
        None,
        ActivityPage,
        parameters=tuple(ACTIVITY),
        media="text/csv",
    ),
    Operation(
        "get",
        "/api/sign-in/users",
        "demoUsers",
        "session",
        "Demo mode: the users to pick from",
        "anyone",
        None,
        Users,
        "outside demo mode",
    ),
    Operation(
        "post",
        "/api/sign-in",
        "demoSignIn",
        "session",
        "Demo mode: sign in as a user (sets the session cookie)",
        "anyone",
        None,
        Done,
        "outside demo mode",
    ),
    Operation(
        "post",
        "/api/sign-out",
        "signOut",
        "session",
        "Clear the session cookie and revoke its session",
        "anyone",
        None,
        Done,
    ),
    Operation(
        "get",
        "/api/account",
        "account",
        "session",
        "The account page: the person's teams and role in each, and the sessions they are signed in with",
        "user",
        None,
        Account,
    ),
    Operation(
        "post",
        "/api/account/sessions/{id}/revoke",
        "revokeSession",
        "session",
        "End one of the person's own sessions on every node (their current one: this browser signs out)",
        "user",
        None,
        Done,
        "no active session of the person's with this id (another person's included)",
    ),
    Operation(
        "post",
        "/api/session/renew",
        "renewSession",
        "session",
        "A new session cookie before the current one expires (never past the session's maximum age)",
        "user",
        None,
        Renewed,
    ),
]

TAGS = [
    {"name": "ingest", "description": "Clusters report jobs and register what they refer to (a cluster key)"},
    {"name": "actions", "description": "A person's actions on jobs, carried out by the clusters that hold them"},
    {"name": "teams", "description": "A team's members, roles, clusters and trajectories"},
    {"name": "session", "description": "Who is signed in, the browser's session cookie, and the account's sessions"},
    {"name": "admin", "description": "Teams and users, for a platform administrator's token (docs/operations.md)"},
]
