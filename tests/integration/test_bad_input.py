"""Values PostgreSQL cannot take, sent to every route of a live node: ids past a bigint (asyncpg cannot send
them) and NUL in text (PostgreSQL refuses it). Each is a 422 naming the field, or the 401 of a check that
comes first; never a 500."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from urllib.parse import quote

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Route

from gateway.config import Settings
from gateway.web.app import create_app
from tests.conftest import Process, Stack
from tests.integration.conftest import Team, make_team

HUGE_IDS = [2**63, 2**64, 10**30]  # 2**63 - 1 is the largest id a bigint holds
NUL_TEXTS = ["\x00", "name\x00with a NUL"]
PATH_ID = f"id: expected an id from 1 to {2**63 - 1}"


@dataclass(frozen=True)
class Case:
    method: str
    path: str  # `{bad}` is where the bad value goes when the path carries it
    who: str  # "cluster" or "user": whose credentials go with it
    body: object = None  # `BAD` where the bad value goes
    field: str = PATH_ID  # what the refusal must say: at least the field it names

    def __str__(self) -> str:
        return f"{self.method} {self.path}" + ("" if self.field == PATH_ID else f" {self.field}")


BAD = object()


def job(**fields: object) -> dict[str, object]:
    return {"jobs": [{"status": "queued", "trajectory_id": 1, "kind": "analysis", "name": "RDF", **fields}]}


ID_CASES = [
    Case("POST", "/api/ingest/jobs", "cluster", {"jobs": [{"id": BAD, "status": "running"}]}, "$.jobs[0].id"),
    Case("POST", "/api/ingest/jobs", "cluster", job(trajectory_id=BAD), "$.jobs[0].trajectory_id"),
    Case("POST", "/api/ingest/jobs", "cluster", job(analysis_id=BAD), "$.jobs[0].analysis_id"),
    Case("POST", "/api/ingest/jobs", "cluster", job(submission_id=BAD), "$.jobs[0].submission_id"),
    Case("POST", "/api/ingest/analyses", "cluster", {"trajectory_id": BAD, "plugin": "RDF"}, "$.trajectory_id"),
    Case("POST", "/api/ingest/submissions", "cluster", {"title": "t", "trajectory_id": BAD}, "$.trajectory_id"),
    Case("POST", "/api/ingest/submissions", "cluster", {"title": "t", "user_id": BAD}, "$.user_id"),
    Case("POST", "/api/ingest/submissions/{bad}", "cluster", {"staging": "syncing"}),
    Case("POST", "/api/ingest/confirmations", "cluster", {"command": "c", "jobs": [BAD]}, "$.jobs[0]"),
    Case("POST", "/api/trajectories/{bad}/remove-running", "user"),
    Case("GET", "/api/trajectories/{bad}/remove-running/preview", "user"),
    Case("GET", "/api/trajectories/{bad}/retry-failed/preview", "user"),
    Case("POST", "/api/trajectories/{bad}/retry-failed", "user"),
    Case("POST", "/api/analyses/{bad}/retry-failed", "user"),
    Case("GET", "/api/teams/{bad}/members", "user"),
    Case("GET", "/api/teams/{bad}/trajectories", "user"),
    Case("POST", "/api/submissions/actions", "user", {"action": "kill", "submissions": [BAD]}, "$.submissions[0]"),
    Case("POST", "/api/submissions/actions", "user", {"action": "kill", "tasks": [BAD]}, "$.tasks[0]"),
    Case("GET", "/api/trajectories/{bad}", "user"),
    Case("GET", "/api/trajectories/{bad}/analyses", "user"),
    Case("DELETE", "/api/analyses/{bad}", "user"),
    Case("GET", "/api/submissions/instance-types?submission={bad}", "user", field="submission[0]: expected an id"),
    Case("POST", "/api/submissions/actions/preview", "user", {"action": "kill", "tasks": [BAD]}, "$.tasks[0]"),
    Case("GET", "/api/teams/{bad}/submissions", "user"),
    Case("GET", "/api/teams/1/submissions?user={bad}", "user", field="user: expected a user id"),
    Case("GET", "/api/teams/1/submissions?offset={bad}", "user", field="offset: expected a whole number"),
    Case("GET", "/api/teams/{bad}/submissions.csv", "user"),
    Case("GET", "/api/teams/{bad}/projects", "user"),
    Case("GET", "/api/teams/{bad}/activity", "user"),
    Case("GET", "/api/teams/{bad}/activity.csv", "user"),
    Case("GET", "/api/teams/1/activity?person={bad}", "user", field="person: "),
    Case("GET", "/api/teams/{bad}/trajectories/active", "user"),
    Case("GET", "/api/teams/1/trajectories?limit={bad}", "user", field="limit: expected a whole number"),
    Case("POST", "/api/account/sessions/{bad}/revoke", "user"),
    Case("POST", "/api/teams/{bad}/members", "user", {"user": 1, "role": "member"}),
    Case("DELETE", "/api/teams/{bad}/members/{bad}", "user"),
    Case("GET", "/api/teams/{bad}/clusters", "user"),
    Case("POST", "/api/teams/{bad}/clusters", "user", {"name": "gpu"}),
    Case("POST", "/api/teams/{bad}/clusters/{bad}/key", "user"),
    Case("DELETE", "/api/teams/{bad}/clusters/{bad}", "user"),
    Case("DELETE", "/api/admin/teams/{bad}", "user"),
    Case("DELETE", "/api/admin/users/{bad}", "user"),
    Case("GET", "/api/teams/{bad}/views", "user"),
    Case("POST", "/api/teams/{bad}/views", "user", {"name": "v", "view": {"columns": [{"key": "id"}]}}),
    Case("PUT", "/api/teams/{bad}/views/default", "user", {"view_id": None}),
    Case("PUT", "/api/teams/{bad}/views/order", "user", {"view_ids": []}),
    Case("PUT", "/api/teams/1/views/{bad}", "user", {"name": "v"}, field="view: expected an id"),
    Case("DELETE", "/api/teams/1/views/{bad}", "user", field="view: expected an id"),
    Case(
        "POST",
        "/api/teams/1/views",
        "user",
        {"name": "v", "view": {"filters": {"user": BAD}, "columns": [{"key": "id"}]}},
        "$.view.filters.user",
    ),
]
TEXT_CASES = [
    Case("GET", "/api/teams/1/submissions?q={bad}", "user", field="q: contains a NUL"),
    Case("GET", "/api/teams/1/submissions.csv?project={bad}", "user", field="project: contains a NUL"),
    Case("GET", "/api/teams/1/trajectories/active?q={bad}", "user", field="q: contains a NUL"),
    Case("GET", "/api/teams/1/activity?action={bad}", "user", field="action: "),
    Case("POST", "/api/ingest/jobs", "cluster", job(name=BAD), "$.jobs[0].name"),
    Case(
        "POST",
        "/api/ingest/jobs",
        "cluster",
        {"jobs": [{"id": 1, "status": "failed", "error": BAD}]},
        "$.jobs[0].error",
    ),
    Case("POST", "/api/ingest/trajectories", "cluster", {"name": BAD}, "$.name"),
    Case("POST", "/api/ingest/analyses", "cluster", {"trajectory_id": 1, "plugin": BAD}, "$.plugin"),
    Case("POST", "/api/ingest/submissions", "cluster", {"title": BAD}, "$.title"),
    Case("POST", "/api/ingest/submissions", "cluster", {"title": "t", "project": BAD}, "$.project"),
    Case("POST", "/api/ingest/submissions", "cluster", {"title": "t", "instance_type": BAD}, "$.instance_type"),
    Case(
        "POST",
        "/api/submissions/actions",
        "user",
        {"action": "instance_type", "submissions": [1], "instance_type": BAD},
        "$.instance_type",
    ),
    Case(
        "POST",
        "/api/ingest/instance-types",
        "cluster",
        {"instance_types": [{"name": BAD, "cores": 4, "memory_gb": 16}]},
        "$.instance_types[0].name",
    ),
    Case("POST", "/api/teams/1/views", "user", {"name": BAD, "view": {"columns": [{"key": "id"}]}}, "$.name"),
    Case("PUT", "/api/account/preferences", "user", {"finishes": BAD}, "$.finishes"),
    Case(
        "POST",
        "/api/teams/1/views",
        "user",
        {"name": "v", "view": {"filters": {"q": BAD}, "columns": [{"key": "id"}]}},
        "$.view.filters.q",
    ),
]
# Routes that read nothing a caller chooses but its credentials (those are checked by signature or hash).
NO_INPUT = {
    "/api/admin/teams",  # a name: tests/integration/test_roles.py sends it NUL
    "/api/admin/users",
    "/api/me",
    "/api/account",
    "/api/sign-in/users",
    "/api/sign-out",
    "/api/session/renew",
    "/api/ingest/metrics",
}


def put(value: object, into: object) -> object:
    if into is BAD:
        return value
    if isinstance(into, dict):
        return {k: put(value, v) for k, v in into.items()}
    if isinstance(into, list):
        return [put(value, v) for v in into]
    return into


def headers(case: Case, team: Team) -> dict[str, str]:
    return {"Authorization": f"Bearer {team.cluster_key if case.who == 'cluster' else team.token}"}


@pytest.fixture(scope="module")
async def team(pool: asyncpg.Pool, stack: Stack) -> Team:
    """One team for the module's some 200 calls: each is refused or only reads, so none changes what the next
    meets (a team for each was most of their time)."""
    return await make_team(pool, stack.secret)


@pytest.fixture(scope="module")
async def client(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    """One client for the tables' calls: making one costs tens of milliseconds (its TLS context)."""
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, timeout=10) as client:
        yield client


async def send(client: httpx.AsyncClient, case: Case, value: object, team: Team) -> httpx.Response:
    # In a query string the value is percent-encoded, as a browser sends it (a NUL arrives as %00).
    path = case.path.format(bad=quote(str(value)) if "?" in case.path else value)
    client.cookies.clear()  # each call with its token alone
    return await client.request(case.method, path, json=put(value, case.body), headers=headers(case, team))


def refused_naming(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "invalid" and field in body["message"], body


@pytest.mark.parametrize("value", HUGE_IDS, ids=["2**63", "2**64", "10**30"])
@pytest.mark.parametrize("case", ID_CASES, ids=str)
async def test_an_id_past_a_bigint_is_refused_naming_the_field(
    client: httpx.AsyncClient, team: Team, case: Case, value: int
) -> None:
    refused_naming(await send(client, case, value, team), case.field)


@pytest.mark.parametrize("value", NUL_TEXTS, ids=["nul", "inner-nul"])
@pytest.mark.parametrize("case", TEXT_CASES, ids=str)
async def test_nul_in_text_is_refused_naming_the_field(
    client: httpx.AsyncClient, team: Team, case: Case, value: str
) -> None:
    refused_naming(await send(client, case, value, team), case.field)


async def test_the_largest_bigint_is_an_id_like_any_other(stack: Stack, team: Team) -> None:
    """At the bound itself the request goes through: refused as a row that does not exist, not as input."""
    largest = str(2**63 - 1)
    async with httpx.AsyncClient(
        base_url=stack.nodes[0].http, headers={"Authorization": f"Bearer {team.token}"}
    ) as client:
        assert (await client.post(f"/api/trajectories/{largest}/retry-failed")).status_code == 403
        assert (await client.get(f"/api/teams/{largest}/members")).status_code == 403


@pytest.mark.parametrize("key", [f"c{2**63}.secret", f"c{10**19 - 1}.secret", "c\u00b2.secret", "c0.secret"])
async def test_a_cluster_key_naming_an_impossible_cluster_is_unauthorized(stack: Stack, key: str) -> None:
    async with httpx.AsyncClient(base_url=stack.nodes[0].http) as client:
        response = await client.post(
            "/api/ingest/jobs",
            json={"jobs": [{"id": 1, "status": "running"}]},
            headers={"Authorization": f"Bearer {key}".encode("latin-1")},
        )
    assert response.status_code == 401 and response.json()["error"] == "unauthorized"


@pytest.mark.parametrize("value", [*HUGE_IDS, "9" * 30, 0, -1, 1.5, "\x00", True, None])
async def test_sign_in_refuses_a_user_id_that_cannot_be_one(demo_node: Process, value: object) -> None:
    async with httpx.AsyncClient(base_url=demo_node.http) as client:
        response = await client.post("/api/sign-in", json={"user_id": value})
    refused_naming(response, "user_id")


async def test_sign_in_still_takes_a_user_id_as_digits(demo_node: Process, team: Team) -> None:
    async with httpx.AsyncClient(base_url=demo_node.http) as client:
        assert (await client.post("/api/sign-in", json={"user_id": str(team.user_id)})).status_code == 200
        assert (await client.post("/api/sign-in", json={"user_id": team.user_id})).status_code == 200


def _route(path: str) -> str:
    """The app's route a case's path is sent to, every id spelt `{id:int}`: a bad id stands for one, and a team's
    id 1 for one where the bad value is elsewhere."""
    path = path.split("?")[0]
    return re.sub(r"/teams/1(?=/|$)", "/teams/{id:int}", path.replace("{bad}", "{id:int}"))


def test_every_route_that_takes_input_is_in_the_table() -> None:
    """A new route joins the table (or NO_INPUT): the table is what keeps it from answering 500."""
    covered = {_route(c.path) for c in (*ID_CASES, *TEXT_CASES)} | NO_INPUT | {"/api/sign-in"}
    app = create_app(Settings(secret="x" * 32))
    paths = {
        re.sub(r"\{\w+:int\}", "{id:int}", r.path)  # a route's second id is tried with its first
        for r in app.routes
        if isinstance(r, Route) and r.path.startswith("/api/")
    }
    assert paths - covered == set()


# Every query parameter that takes a number, on every route that reads one; what int() refuses (and what it reads
# as another script's number) is a 422 naming the parameter.
NUMERIC_QUERY = [
    ("/api/teams/{team}/submissions", "offset"),
    ("/api/teams/{team}/submissions", "limit"),
    ("/api/teams/{team}/submissions", "user"),
    ("/api/teams/{team}/submissions.csv", "user"),
    ("/api/teams/{team}/trajectories", "offset"),
    ("/api/teams/{team}/trajectories", "limit"),
    ("/api/teams/{team}/trajectories/active", "offset"),
    ("/api/teams/{team}/trajectories/active", "limit"),
    ("/api/submissions/instance-types", "submission"),
    ("/api/teams/{team}/activity", "person"),
    ("/api/teams/{team}/activity", "limit"),
]
SEARCHED = [
    "/api/teams/{team}/submissions",
    "/api/teams/{team}/submissions.csv",
    "/api/teams/{team}/trajectories",
    "/api/teams/{team}/trajectories/active",
]
# Digits of every script, superscripts, fractions, circled and Roman numerals, mixed with ASCII digits and signs.
UNICODE_DIGITS = st.text(
    st.one_of(st.characters(categories=["Nd", "No", "Nl"]), st.sampled_from("0123456789+- _")), min_size=1
)


class OneConnection:
    """One HTTP/1.1 connection, kept alive from request to request: an answer that resets it fails the next."""

    def __init__(self, base: str, token: str) -> None:
        address = httpx.URL(base)
        self.host = f"{address.host}:{address.port}"
        self.token = token
        self.sock = socket.create_connection((address.host, address.port), timeout=30)
        self.pending = b""

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        """The status, header fields (named in lower case) and whole body of a GET on this connection."""
        self.sock.sendall(
            f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {self.token}\r\n\r\n".encode()
        )
        head = self._until(b"\r\n\r\n").decode("latin-1").split("\r\n")
        fields = {name.lower(): value for name, _, value in (line.partition(": ") for line in head[1:])}
        assert fields.get("connection") != "close", head
        if fields.get("transfer-encoding") == "chunked":
            chunks = []
            while size := int(self._until(b"\r\n"), 16):
                chunks.append(self._take(size + 2)[:-2])
            self._until(b"\r\n")
            return int(head[0].split()[1]), fields, b"".join(chunks)
        return int(head[0].split()[1]), fields, self._take(int(fields["content-length"]))

    def _until(self, end: bytes) -> bytes:
        while end not in self.pending:
            self._read()
        found, _, self.pending = self.pending.partition(end)
        return found

    def _take(self, n: int) -> bytes:
        while len(self.pending) < n:
            self._read()
        found, self.pending = self.pending[:n], self.pending[n:]
        return found

    def _read(self) -> None:
        data = self.sock.recv(65536)
        assert data, "the node closed the kept-alive connection"
        self.pending += data


@pytest.fixture
def kept_alive(stack: Stack, team: Team) -> Iterator[OneConnection]:
    connection = OneConnection(stack.nodes[0].http, team.token)
    yield connection
    connection.sock.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.sampled_from(NUMERIC_QUERY), text=UNICODE_DIGITS)
def test_a_number_in_any_script_is_refused_naming_its_parameter_on_the_same_connection(
    stack: Stack, team: Team, kept_alive: OneConnection, where: tuple[str, str], text: str
) -> None:
    path = f"{where[0].format(team=team.id)}?{where[1]}={quote(text, safe='')}"
    status, fields, body = kept_alive.get(path)
    while status == 429:  # past this user's rate (GATEWAY_HTTP_RATE): the answer says when to come back
        time.sleep(float(fields["retry-after"]))
        status, fields, body = kept_alive.get(path)
    name = where[1]
    if text.isascii() and text.isdigit():
        assert status < 500, body
    else:
        assert status == 422 and json.loads(body)["message"].startswith(name), body
    assert "Traceback" not in stack.nodes[0].output(), stack.nodes[0].tracebacks()


@pytest.mark.parametrize(
    "text", ["\u00b2", "1\u00b2", "\u0661\u0662", "\u2460"], ids=["sup2", "1sup2", "arabic", "circled"]
)
@pytest.mark.parametrize("route", SEARCHED)
async def test_a_search_in_any_script_s_digits_is_a_search(stack: Stack, team: Team, route: str, text: str) -> None:
    """Found as text, never as an id: the whole answer, the CSV to its last line."""
    async with httpx.AsyncClient(base_url=stack.nodes[0].http, timeout=30) as client:
        response = await client.get(
            route.format(team=team.id), params={"q": text}, headers={"Authorization": f"Bearer {team.token}"}
        )
    assert response.status_code == 200, response.text
    if route.endswith(".csv"):
        assert response.text.startswith('"JOB ID",')
        assert response.text.endswith("\r\n")
    else:
        response.json()
    assert "Traceback" not in stack.nodes[0].output(), stack.nodes[0].tracebacks()
