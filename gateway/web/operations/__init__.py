"""Every HTTP route under /api as the OpenAPI document describes it (gateway.web.node.schema turns this into the
document; tests/unit/test_schema.py holds it equal to the app's routes): one module per area of the API, in the
order of its tags."""

from __future__ import annotations

from . import actions, admin, ingest, session, submissions, teams
from .operation import Operation

__all__ = ["ROUTES", "TAGS", "Operation"]

ROUTES: list[Operation] = [
    *ingest.ROUTES,
    *actions.ROUTES,
    *teams.ROUTES,
    *submissions.ROUTES,
    *session.ROUTES,
    *admin.ROUTES,
]

TAGS = [
    {"name": "ingest", "description": "Clusters report jobs and register what they refer to (a cluster key)"},
    {"name": "actions", "description": "A person's actions on jobs, carried out by the clusters that hold them"},
    {"name": "teams", "description": "A team's members, roles, clusters and trajectories"},
    {"name": "session", "description": "Who is signed in, the browser's session cookie, and the account's sessions"},
    {"name": "admin", "description": "Teams and users, for a platform administrator's token (docs/operations.md)"},
]
