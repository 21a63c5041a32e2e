"""The published specs, as served by a live node, accepted by tools this project did not write: the AsyncAPI
reference parser (`@asyncapi/parser`, from npm) and `openapi-spec-validator`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import msgspec
from openapi_spec_validator import validate

from gateway.core.protocol import ClientMessages, ServerMessages
from gateway.web.http.answers import Account, Me, Members, Trajectories
from tests.conftest import Stack, node_tools
from tests.integration.conftest import Team
from tests.unit.test_schema import tags


async def served(stack: Stack, path: str) -> dict:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        response = await client.get(path)
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
    return response.json()


async def test_the_asyncapi_document_parses_with_the_reference_parser(stack: Stack, tmp_path: Path) -> None:
    """AsyncAPI 3.0 with no error and no warning, read as the gateway means it: it receives the client's messages
    and sends its own, all on the socket at /ws."""
    tools = node_tools("the AsyncAPI reference parser")
    document = tmp_path / "asyncapi.json"
    document.write_text(json.dumps(await served(stack, "/asyncapi.json")))
    run = subprocess.run(
        ["node", str(tools / "validate_asyncapi.mjs"), str(document)], capture_output=True, text=True, timeout=120
    )
    lines = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    problems = [d for d in lines if "severity" in d and d["severity"] <= 1]  # errors and warnings
    assert run.returncode == 0 and not problems, problems or run.stderr
    [parsed] = [line["document"] for line in lines if "document" in line]
    assert parsed["version"] == "3.0.0"
    read = {op["action"]: op for op in parsed["operations"].values()}
    assert set(read) == {"receive", "send"} and len(parsed["operations"]) == 2
    assert read["receive"]["addresses"] == read["send"]["addresses"] == ["/ws"]
    assert set(read["receive"]["messages"]) == tags(ClientMessages)
    assert set(read["send"]["messages"]) == tags(ServerMessages)


async def test_the_openapi_document_passes_openapi_spec_validator(stack: Stack) -> None:
    document = await served(stack, "/openapi.json")
    validate(document)  # raises with the reason when the document is not valid OpenAPI
    operations = [op for path in document["paths"].values() for op in path.values()]
    assert all(op.get("operationId") and op.get("tags") for op in operations)
    assert len({op["operationId"] for op in operations}) == len(operations)
    assert document["servers"]


async def test_what_the_routes_answer_is_what_the_document_says(stack: Stack, team: Team) -> None:
    """The GET routes' bodies decode, strictly, as the Structs the OpenAPI document names for them."""
    document = await served(stack, "/openapi.json")
    headers = {"Authorization": f"Bearer {team.token}"}
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, headers=headers) as client:
        for path, struct in (
            ("/api/me", Me),
            ("/api/account", Account),
            (f"/api/teams/{team.id}/members", Members),
            (f"/api/teams/{team.id}/trajectories", Trajectories),
        ):
            response = await client.get(path)
            assert response.status_code == 200, (path, response.text)
            msgspec.json.decode(response.content, type=struct, strict=True)
            templated = path.replace(str(team.id), "{id}")
            schema = document["paths"][templated]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
            assert schema["$ref"].endswith(f"/{struct.__name__}")
