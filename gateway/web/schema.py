"""The AsyncAPI document of the websocket protocol and the OpenAPI document of the HTTP API, generated from
the msgspec types the gateway itself decodes and encodes with, so they cannot drift from the code."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..core.control import ActionResult, SubmissionsAction
from ..core.ingest import IngestBatch, IngestResponse, NewAnalysis, NewSubmission, NewTrajectory, SubmissionUpdate
from ..core.protocol import ClientMessages, ServerMessages
from ..core.team import MetricsReport

REF = "#/components/schemas/{name}"


class Created(msgspec.Struct):
    id: int


class Problem(msgspec.Struct):
    error: str
    message: str


# (method, path, summary, who may call, request body, answer): every HTTP route under /api.
ROUTES: list[tuple[str, str, str, str, Any, Any]] = [
    ("post", "/api/ingest/jobs", "Create jobs and report on them, all or nothing", "cluster", IngestBatch, IngestResponse),
    ("post", "/api/ingest/trajectories", "Register a trajectory this cluster stores", "cluster", NewTrajectory, Created),
    ("post", "/api/ingest/analyses", "Register an analysis of a pipeline run", "cluster", NewAnalysis, Created),
    ("post", "/api/ingest/submissions", "Submit a batch of work", "cluster", NewSubmission, Created),
    ("post", "/api/ingest/submissions/{id}", "Move a submission's data along, or mark it downloaded", "cluster", SubmissionUpdate, None),
    ("post", "/api/ingest/metrics", "Report CPU, Memory, Disk and Network", "cluster", MetricsReport, None),
    ("post", "/api/trajectories/{id}/remove-running", "Remove Running Jobs", "user", None, ActionResult),
    ("post", "/api/trajectories/{id}/retry-failed", "Retry Failed Jobs", "user", None, ActionResult),
    ("post", "/api/analyses/{id}/retry-failed", "Retry Failed Frames of an analysis", "user", None, ActionResult),
    ("post", "/api/submissions/actions", "An action of the Submissions page", "user", SubmissionsAction, ActionResult),
    ("get", "/api/me", "The signed-in user and their teams", "user", None, None),
    ("get", "/api/teams/{id}/members", "My Team: members and who is online", "user", None, None),
    ("get", "/api/teams/{id}/trajectories", "The team's trajectories, newest first", "user", None, None),
    ("get", "/api/sign-in/users", "Demo mode: the users to pick from", "anyone", None, None),
    ("post", "/api/sign-in", "Demo mode: sign in as a user (sets the session cookie)", "anyone", None, None),
    ("post", "/api/sign-out", "Clear the session cookie", "anyone", None, None),
    ("post", "/api/session/renew", "A new session cookie before the current one expires", "user", None, None),
]


def asyncapi() -> dict[str, Any]:
    (client, server), components = msgspec.json.schema_components([ClientMessages, ServerMessages], ref_template=REF)
    return {
        "asyncapi": "2.6.0",
        "info": {
            "title": "Jobs gateway websocket protocol",
            "version": "1",
            "description": "One websocket at /ws; JSON text frames, or MessagePack binary frames with the `msgpack` "
            "subprotocol. See docs/protocol.md.",
        },
        "channels": {
            "/ws": {
                "publish": {"summary": "Client to server", "message": {"payload": client}},
                "subscribe": {"summary": "Server to client", "message": {"payload": server}},
            }
        },
        "components": {
            "schemas": components,
            "securitySchemes": {"token": {"type": "httpBearerToken", "description": "Authorization: Bearer, ?token= or the session cookie"}},
        },
    }


def openapi() -> dict[str, Any]:
    types = sorted({t for r in ROUTES for t in (r[4], r[5]) if t is not None} | {Problem}, key=lambda t: t.__name__)
    _, components = msgspec.json.schema_components(types, ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, who, request, answer in ROUTES:
        operation: dict[str, Any] = {"summary": summary, "responses": {}}
        if who != "anyone":
            operation["security"] = [{"cluster_key" if who == "cluster" else "user_token": []}]
        if "{id}" in path:
            operation["parameters"] = [{"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}]
        if request is not None:
            operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": {"$ref": REF.format(name=request.__name__)}}}}
        ok: dict[str, Any] = {"description": "OK"}
        if answer is not None:
            ok["content"] = {"application/json": {"schema": {"$ref": REF.format(name=answer.__name__)}}}
        operation["responses"]["200" if answer is not None or method == "get" else "204"] = ok
        problem = {"content": {"application/json": {"schema": {"$ref": REF.format(name="Problem")}}}}
        operation["responses"].update({
            "401": {"description": "No valid token or key", **problem},
            "403": {"description": "Not allowed", **problem},
            "422": {"description": "Invalid: the message names the bad field", **problem},
        })
        paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Jobs gateway HTTP API", "version": "1"},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "user_token": {"type": "http", "scheme": "bearer", "description": "a user token (or the session cookie)"},
                "cluster_key": {"type": "http", "scheme": "bearer", "description": "a cluster's ingest key"},
            },
        },
    }


_ASYNCAPI = asyncapi()
_OPENAPI = openapi()


async def asyncapi_document(request: Request) -> Response:
    return JSONResponse(_ASYNCAPI)


async def openapi_document(request: Request) -> Response:
    return JSONResponse(_OPENAPI)
