"""The AsyncAPI and OpenAPI documents come from the code's own types and routes, so they cannot drift."""

import msgspec
from starlette.routing import Route

from gateway.config import Settings
from gateway.core.protocol import ClientMessages, ServerMessages
from gateway.web.app import create_app
from gateway.web.schema import ROUTES, asyncapi, openapi


def tags(union: object) -> set[str]:
    return {t.__struct_config__.tag for t in union.__args__}  # type: ignore[attr-defined]


def test_asyncapi_lists_every_message_each_way() -> None:
    doc = asyncapi()
    channel = doc["channels"]["/ws"]
    messages = doc["components"]["messages"]

    def payloads(operation: str) -> set[str]:
        refs = [
            messages[m["$ref"].rsplit("/", 1)[1]]["payload"]["$ref"] for m in channel[operation]["message"]["oneOf"]
        ]
        return {ref.rsplit("/", 1)[1] for ref in refs}

    assert payloads("publish") == {t.__name__ for t in ClientMessages.__args__}  # type: ignore[attr-defined]
    assert payloads("subscribe") == {t.__name__ for t in ServerMessages.__args__}  # type: ignore[attr-defined]
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


def test_openapi_documents_every_api_route_of_the_app() -> None:
    app = create_app(Settings(secret="s" * 40, database_url="postgresql://unused", redis_url="redis://unused"))
    served = {
        (method.lower(), route.path.replace("{id:int}", "{id}"))
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
