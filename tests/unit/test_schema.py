"""The AsyncAPI and OpenAPI documents come from the code's own types and routes, so they cannot drift."""

import re

import msgspec
from starlette.routing import Route

from gateway.config import Settings
from gateway.core.protocol import MSGPACK_SUBPROTOCOL, ClientMessages, ServerMessages
from gateway.web.app import create_app
from gateway.web.node.schema import ROUTES, asyncapi, openapi
from gateway.web.people.auth import TOKEN_COOKIE


def tags(union: object) -> set[str]:
    return {t.__struct_config__.tag for t in union.__args__}  # type: ignore[attr-defined]


def test_asyncapi_lists_every_message_each_way() -> None:
    doc = asyncapi()
    assert doc["asyncapi"] == "3.0.0"
    [(name, channel)] = doc["channels"].items()
    assert channel["address"] == "/ws"
    messages = doc["components"]["messages"]
    assert set(channel["messages"]) == set(messages)

    def payloads(action: str) -> set[str]:
        [operation] = [op for op in doc["operations"].values() if op["action"] == action]
        assert operation["channel"] == {"$ref": f"#/channels/{name}"}
        prefix = f"#/channels/{name}/messages/"
        assert all(m["$ref"].startswith(prefix) for m in operation["messages"])
        refs = [messages[m["$ref"].removeprefix(prefix)]["payload"]["$ref"] for m in operation["messages"]]
        return {ref.rsplit("/", 1)[1] for ref in refs}

    # Written from the gateway's side: it receives the client's messages and sends its own.
    assert payloads("receive") == {t.__name__ for t in ClientMessages.__args__}  # type: ignore[attr-defined]
    assert payloads("send") == {t.__name__ for t in ServerMessages.__args__}  # type: ignore[attr-defined]
    assert set(messages) == tags(ClientMessages) | tags(ServerMessages)
    assert tags(ServerMessages) >= {
        "snapshot",
        "batch",
        "summary",
        "notice",
        "glow",
        "presence",
        "clusters",
        "resync",
        "error",
        "pong",
    }
    assert msgspec.json.decode(msgspec.json.encode(doc))  # serialisable as served


def test_asyncapi_says_how_to_connect() -> None:
    """The handshake's choices: TLS or not, the token's three places, the MessagePack subprotocol."""
    doc = asyncapi()
    assert {s["protocol"] for s in doc["servers"].values()} == {"ws", "wss"}
    schemes = doc["components"]["securitySchemes"]
    assert {(s["type"], s.get("in"), s.get("name")) for s in schemes.values()} == {
        ("http", None, None),
        ("httpApiKey", "query", "token"),
        ("httpApiKey", "cookie", TOKEN_COOKIE),
    }
    for server in doc["servers"].values():
        assert {ref["$ref"].rsplit("/", 1)[1] for ref in server["security"]} == set(schemes)
    [channel] = doc["channels"].values()
    subprotocol = channel["bindings"]["ws"]["headers"]["properties"]["Sec-WebSocket-Protocol"]
    assert subprotocol["examples"] == [MSGPACK_SUBPROTOCOL]


def test_openapi_documents_every_api_route_of_the_app() -> None:
    app = create_app(Settings(secret="s" * 40, database_url="postgresql://unused", redis_url="redis://unused"))
    served = {
        (method.lower(), re.sub(r"\{(\w+):int\}", r"{\1}", route.path))
        for route in app.routes
        if isinstance(route, Route) and route.path.startswith("/api/")
        for method in (route.methods or ()) - {"HEAD"}
    }
    documented = {(r.method, r.path) for r in ROUTES}
    assert served == documented
    doc = openapi()
    assert doc["paths"]["/api/ingest/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"][
        "$ref"
    ].endswith("IngestBatch")
    assert "JobReport" in doc["components"]["schemas"]
