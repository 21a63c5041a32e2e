"""Log lines in JSON: an access line's request in fields, its duration, and fields a line carries itself."""

from __future__ import annotations

import asyncio
import json
import logging

from starlette.types import Message, Receive, Scope, Send

from gateway.web.node.logs import AccessTiming, JsonLines, RedactSecrets, RequestTimer, bind


def _access_record() -> logging.LogRecord:
    args = ("127.0.0.1:5000", "GET", "/api/me?token=eyJ.a.b", "1.1", 200)
    return logging.LogRecord("gateway.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None)


def test_an_access_line_carries_its_request_in_fields_redacted() -> None:
    record = _access_record()
    RedactSecrets().filter(record)
    record.duration = 0.0123
    line = json.loads(JsonLines().format(record))
    assert line["method"] == "GET" and line["path"] == "/api/me?token=[redacted]"
    assert line["status"] == 200 and line["client"] == "127.0.0.1:5000" and line["http_version"] == "1.1"
    assert line["duration_ms"] == 12.3
    assert line["message"] == '127.0.0.1:5000 - "GET /api/me?token=[redacted] HTTP/1.1" 200'


def test_a_line_logged_with_fields_carries_them() -> None:
    record = logging.LogRecord(
        "gateway.web.websocket.ws", logging.INFO, __file__, 1, "websocket closed: code %s", (1000,), None
    )
    record.fields = {"event": "websocket_closed", "code": 1000, "bytes_sent": 42}
    line = json.loads(JsonLines().format(record))
    assert (line["event"], line["code"], line["bytes_sent"], line["message"]) == (
        "websocket_closed",
        1000,
        42,
        "websocket closed: code 1000",
    )


def test_the_access_line_is_timed_from_the_request_reaching_the_app() -> None:
    records: list[logging.LogRecord] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await asyncio.sleep(0.02)
        record = _access_record()  # the server logs it as the response starts, from the request's task
        AccessTiming().filter(record)
        records.append(record)

    async def receive() -> Message:
        return {"type": "http.request"}

    async def send(message: Message) -> None:
        pass

    asyncio.run(RequestTimer(app)({"type": "http", "headers": []}, receive, send))
    assert 0.015 < records[0].duration < 5


def test_a_line_outside_a_request_has_no_duration() -> None:
    record = _access_record()
    AccessTiming().filter(record)
    assert "duration_ms" not in json.loads(JsonLines().format(record))


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def _lines_of_a_request(headers: list[tuple[bytes, bytes]]) -> list[dict[str, object]]:
    """The JSON lines a request's task writes: one from the app, after it bound a cluster's ids, and the access line."""
    lines: list[dict[str, object]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        bind(cluster_id=7, team_id=3)  # as the ingest's cluster check does
        record = logging.LogRecord("gateway.web.cluster.ingest", logging.WARNING, __file__, 1, "refused", None, None)
        lines.append(json.loads(JsonLines().format(record)))
        lines.append(json.loads(JsonLines().format(_access_record())))

    async def receive() -> Message:
        return {"type": "http.request"}

    async def send(message: Message) -> None:
        pass

    asyncio.run(RequestTimer(app)({"type": "http", "headers": headers}, receive, send))
    return lines


def test_every_line_of_a_request_carries_its_id_and_its_clusters_and_teams() -> None:
    lines = _lines_of_a_request([(b"x-request-id", b"req-42")])
    assert [(line["request_id"], line["cluster_id"], line["team_id"]) for line in lines] == [("req-42", 7, 3)] * 2


def test_a_request_without_an_id_is_known_by_its_traces_or_a_fresh_one() -> None:
    traced = _lines_of_a_request([(b"traceparent", f"00-{TRACE_ID}-00f067aa0ba902b7-01".encode())])
    assert {line["request_id"] for line in traced} == {TRACE_ID}
    first, second = _lines_of_a_request([]), _lines_of_a_request([(b"x-request-id", b"a line\nforged")])
    assert len(str(first[0]["request_id"])) == 32 and first[0]["request_id"] != second[0]["request_id"]
    assert "forged" not in str(second[0]["request_id"])


def test_a_line_outside_any_request_carries_no_ids() -> None:
    line = json.loads(JsonLines().format(_access_record()))
    assert not {"request_id", "cluster_id", "team_id", "connection_id"} & set(line)
