"""The AsyncAPI document of the websocket protocol and the OpenAPI document of the HTTP API, generated from
the msgspec types the gateway itself decodes and encodes with, so they cannot drift from the code."""

from __future__ import annotations

import re
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...core.protocol import MSGPACK_SUBPROTOCOL, ClientMessages, ServerMessages
from ..http.answers import Problem
from ..operations import ROUTES, TAGS, Operation
from ..people.auth import TOKEN_COOKIE

__all__ = ["ROUTES", "Operation", "asyncapi", "asyncapi_document", "openapi", "openapi_document"]

REF = "#/components/schemas/{name}"
CHANNEL = "socket"  # the one AsyncAPI channel: the websocket at /ws, whatever protocol channels it carries


def asyncapi() -> dict[str, Any]:
    """AsyncAPI 3.0, written from the gateway's side: one channel (the socket at /ws) with every message, an
    operation that receives the client's messages and one that sends the server's. Each message is named by its
    `type` tag; the protocol's own channels (team:<id>, ...) are values in the messages, not AsyncAPI channels."""
    client_types, server_types = _members(ClientMessages), _members(ServerMessages)
    _, schemas = msgspec.json.schema_components(client_types + server_types, ref_template=REF)
    messages = {_tag(t): _message(t) for t in client_types + server_types}
    return {
        "asyncapi": "3.0.0",
        "id": "urn:jobs-gateway:websocket",
        "info": {
            "title": "Jobs gateway websocket protocol",
            "version": "1",
            "description": "One websocket at /ws; JSON text frames, or MessagePack binary frames with the "
            f"`{MSGPACK_SUBPROTOCOL}` subprotocol. See docs/protocol.md.",
            "license": {"name": "Proprietary"},
            "tags": [{"name": "jobs", "description": "Live job state per team and per trajectory"}],
        },
        "defaultContentType": "application/json",
        "servers": {
            "wss": _server(
                "wss", "A gateway node behind a proxy that terminates TLS", {"examples": ["jobs.example.org"]}
            ),
            "ws": _server("ws", "A gateway node itself, without TLS", {"default": "127.0.0.1:8000"}),
        },
        "channels": {
            CHANNEL: {
                "address": "/ws",
                "title": "The gateway's websocket",
                "description": "Subscribe to team:<id>, team-jobs:<id> and trajectory:<id> on one connection: "
                "each message names its channel in its `channel` field.",
                "messages": {name: {"$ref": f"#/components/messages/{name}"} for name in messages},
                "bindings": {"ws": _handshake()},
            }
        },
        "operations": {
            "receiveClientMessages": _action("receive", "Client to server", client_types),
            "sendServerMessages": _action("send", "Server to client", server_types),
        },
        "components": {
            "messages": messages,
            "schemas": _strict_discriminators(schemas),
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "bearerFormat": "JWT",
                    "description": "A user token (`gateway token --user ID` prints one): Authorization: Bearer",
                },
                "query": {
                    "type": "httpApiKey",
                    "in": "query",
                    "name": "token",
                    "description": "The same token in the URL: /ws?token=...",
                },
                "cookie": {
                    "type": "httpApiKey",
                    "in": "cookie",
                    "name": TOKEN_COOKIE,
                    "description": "The browser's session cookie, which holds the same token",
                },
            },
        },
    }


def _server(protocol: str, description: str, host: dict[str, Any]) -> dict[str, Any]:
    return {
        "host": "{host}",
        "protocol": protocol,
        "description": description,
        "variables": {"host": {"description": "the host (and port) clients connect to", **host}},
        "security": [{"$ref": f"#/components/securitySchemes/{name}"} for name in ("bearer", "query", "cookie")],
    }


def _handshake() -> dict[str, Any]:
    """The ws binding: the handshake's subprotocol header picks the frames' format."""
    return {
        "method": "GET",
        "headers": {
            "type": "object",
            "properties": {
                "Sec-WebSocket-Protocol": {
                    "type": "string",
                    "description": f"`{MSGPACK_SUBPROTOCOL}`: every message, both ways, is a binary MessagePack "
                    "frame with the same fields (the server answers with the subprotocol). Without it: JSON text "
                    "frames.",
                    "examples": [MSGPACK_SUBPROTOCOL],
                }
            },
        },
        "bindingVersion": "0.1.0",
    }


def _action(action: str, summary: str, types: list[Any]) -> dict[str, Any]:
    return {
        "action": action,
        "channel": {"$ref": f"#/channels/{CHANNEL}"},
        "summary": summary,
        "messages": [{"$ref": f"#/channels/{CHANNEL}/messages/{_tag(t)}"} for t in types],
    }


def _members(union: Any) -> list[Any]:
    return list(union.__args__)


def _tag(struct: Any) -> str:
    return str(struct.__struct_config__.tag)


def _message(struct: Any) -> dict[str, Any]:
    doc = " ".join((struct.__doc__ or "").split())
    return {
        "name": _tag(struct),
        "title": struct.__name__,
        "summary": doc.split(". ")[0].rstrip(".") + "." if doc else f"`{_tag(struct)}`",
        "payload": {"$ref": REF.format(name=struct.__name__)},
    }


def _strict_discriminators(value: Any) -> Any:
    """AsyncAPI's schemas take a discriminator as a property name, not OpenAPI's object."""
    if isinstance(value, dict):
        return {
            k: v["propertyName"] if k == "discriminator" and isinstance(v, dict) else _strict_discriminators(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_strict_discriminators(v) for v in value]
    return value


def openapi() -> dict[str, Any]:
    types = {t for r in ROUTES for t in (r.request, r.answer) if t is not None and r.media == "application/json"}
    types |= {Problem}
    _, components = msgspec.json.schema_components(sorted(types, key=lambda t: t.__name__), ref_template=REF)
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Jobs gateway HTTP API",
            "version": "1",
            "description": "Cluster ingest, a person's actions and the browser's session. Live job state streams over "
            "the websocket at /ws (see /asyncapi.json).",
        },
        "servers": [{"url": "/", "description": "this gateway node (every node serves the same API)"}],
        "tags": TAGS,
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "user_token": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a user token (or the session cookie)",
                },
                "cluster_key": {"type": "http", "scheme": "bearer", "description": "a cluster's ingest key"},
            },
        },
    }


def _operation(route: Operation) -> dict[str, Any]:
    operation: dict[str, Any] = {"operationId": route.operation_id, "tags": [route.tag], "summary": route.summary}
    if route.who != "anyone":
        operation["security"] = [{"cluster_key" if route.who == "cluster" else "user_token": []}]
    id_schema = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
    parameters: list[dict[str, Any]] = []
    for name in re.findall(r"\{(\w+)\}", route.path):  # every path parameter is an id
        parameters.append({"name": name, "in": "path", "required": True, "schema": id_schema})
    for name, description in route.query:
        parameters.append(
            {
                "name": name,
                "in": "query",
                "required": True,
                "description": description,
                "schema": {"type": "array", "items": id_schema},
                "style": "form",
                "explode": True,
            }
        )
    parameters += route.parameters
    if parameters:
        operation["parameters"] = parameters
    if route.request is not None:
        operation["requestBody"] = {"required": True, "content": _json(route.request)}
    responses: dict[str, Any] = {}
    if route.answer is None:
        responses["204"] = {"description": "Done"}
    else:
        content = (
            _json(route.answer) if route.media == "application/json" else {route.media: {"schema": {"type": "string"}}}
        )
        responses["200"] = {"description": "OK", "content": content}
    for status, description in _refusals(route):
        responses[status] = {"description": description, "content": _json(Problem)}
    operation["responses"] = responses
    return operation


def _refusals(route: Operation) -> list[tuple[str, str]]:
    """The error answers a route can give, each with the Problem body."""
    refusals = []
    if route.request is not None:
        refusals.append(("400", "Malformed: the body is not JSON"))
    if route.who != "anyone":
        refusals.append(("401", "No valid token or key"))
    if route.who == "user" or route.method == "post" and route.who == "anyone":
        refusals.append(("403", "Not allowed: not a member of the team, or a request from another origin"))
    if route.not_found:
        refusals.append(("404", f"Not found: {route.not_found}"))
    if route.conflict:
        refusals.append(("409", f"Conflict: {route.conflict}"))
    if route.request is not None or route.method == "post":
        refusals.append(("413", "The body is larger than the limit"))
    if (
        route.request is not None
        or "{id}" in route.path
        or route.query
        or route.parameters
        or route.operation_id == "demoSignIn"
    ):
        refusals.append(("422", "Invalid: the message names the bad field"))
    refusals.append(("421", "Misdirected: the Host is not a name this node answers for (GATEWAY_HOSTS)"))
    refusals.append(("429", "Too many requests: retry after the Retry-After header's seconds"))
    return refusals


def _json(struct: Any) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": REF.format(name=struct.__name__)}}}


_ASYNCAPI = asyncapi()
_OPENAPI = openapi()


async def asyncapi_document(request: Request) -> Response:
    return JSONResponse(_ASYNCAPI)


async def openapi_document(request: Request) -> Response:
    return JSONResponse(_OPENAPI)
