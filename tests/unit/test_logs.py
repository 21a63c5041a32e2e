"""Log lines in JSON: an access line's request in fields, its duration, and fields a line carries itself."""

from __future__ import annotations

import asyncio
import json
import logging

from starlette.types import Message, Receive, Scope, Send

from gateway.web.logs import AccessTiming, JsonLines, RedactSecrets, RequestTimer


def _access_record() -> logging.LogRecord:
    args = ("127.0.0.1:5000", "GET", "/api/me?token=eyJ.a.b", "1.1", 200)
    return logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None)


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
    record = logging.LogRecord("gateway.web.ws", logging.INFO, __file__, 1, "websocket closed: code %s", (1000,), None)
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
        record = _access_record()  # uvicorn logs it as the response starts, from the request's task
        AccessTiming().filter(record)
        records.append(record)

    async def receive() -> Message:
        return {"type": "http.request"}

    async def send(message: Message) -> None:
        pass

    asyncio.run(RequestTimer(app)({"type": "http"}, receive, send))
    assert 0.015 < records[0].duration < 5


def test_a_line_outside_a_request_has_no_duration() -> None:
    record = _access_record()
    AccessTiming().filter(record)
    assert "duration_ms" not in json.loads(JsonLines().format(record))
