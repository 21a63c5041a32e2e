"""/api/admin/...: teams and users, for a platform administrator's token."""

from __future__ import annotations

from ..admin.platform_admin import AdminTeams, AdminUsers, Made, NewName, Removed
from .operation import Operation
from .parameters import param

ROUTES: list[Operation] = [
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
        parameters=(param("with_jobs", "remove the team's jobs with it", {"type": "boolean", "default": False}),),
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
]
