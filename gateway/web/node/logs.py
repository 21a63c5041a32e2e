"""Logging for every process: one line per event, text or JSON (`GATEWAY_LOG_FORMAT=json`), tokens kept out (uvicorn
logs websocket and HTTP paths with their query strings).

In JSON, an access line carries its request in fields (`method`, `path`, `status`, `duration_ms`), and any line logged
with `extra={"fields": {...}}` carries those (a websocket's close, gateway.web.websocket.ws). Every line also carries
the ids bound to the task that logs it (`bind`): the HTTP request's `request_id` (its `X-Request-ID`, else its W3C
`traceparent`'s trace id, else a fresh one), the `cluster_id` and `team_id` of an ingest request, a websocket's
`connection_id`, a relay's `partition`."""

from __future__ import annotations

import json
import logging
import re
import time
from contextvars import ContextVar
from secrets import token_hex
from urllib.parse import unquote

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .http_figures import HttpFigures

# A query parameter: its name is read percent-decoded, as a server would (`tok%65n` is `token`).
_PARAMETER = re.compile(r"(?<![^?&;\s\"'])([^=&?;\s\"']+=)([^&\s\"']+)")
_SECRET_NAMES = {"token", "access_token", "key"}
_BEARER = re.compile(r"(Bearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")  # a token under any name, or none


def redact(text: str) -> str:
    text = _PARAMETER.sub(_redact_parameter, text)
    return _JWT.sub("[redacted]", _BEARER.sub(r"\1[redacted]", text))


def _redact_parameter(match: re.Match[str]) -> str:
    name = match.group(1)
    return name + "[redacted]" if unquote(name[:-1]).lower() in _SECRET_NAMES else match.group(0)


class RedactSecrets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.args = (
                tuple(redact(a) if isinstance(a, str) else a for a in record.args)
                if isinstance(record.args, tuple)
                else record.args
            )
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


class DropDenialNoise(logging.Filter):
    """uvicorn's sans-I/O websocket protocol logs this error after every handshake we refuse with an HTTP
    response (a denial response does not mark its handshake complete); our endpoint always accepts or
    refuses, so the line only misleads whoever reads the logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


class QuietHealthChecks(logging.Filter):
    """No access line for a load balancer's or a kubelet's health check that passed (one every 2 s per node, each
    checker): a failed one (503 while draining, say) is still logged."""

    PATHS = ("/healthz", "/readyz")

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5:
            _, _, path, _, status = args
            if isinstance(path, str) and path.split("?", 1)[0] in self.PATHS and isinstance(status, int):
                return status >= 400
        return True


# The ids of what the current task works for; a request's task copies its context, so a binding stays in it.
_bound: ContextVar[dict[str, object] | None] = ContextVar("gateway_log_fields", default=None)
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")  # a caller's id is kept only if it cannot forge a log line
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


def bind(**fields: object) -> None:
    """Add ids to every log line the current task (and the tasks it starts) writes from now on."""
    _bound.set({**(_bound.get() or {}), **fields})


def bound() -> dict[str, object]:
    return _bound.get() or {}


def request_id(headers: list[tuple[bytes, bytes]]) -> str:
    """The id a request's log lines carry: the caller's `X-Request-ID` if sane, else its trace's id."""
    for name, value in headers:
        if name == b"x-request-id":
            text = value.decode("latin-1")
            if _REQUEST_ID.fullmatch(text):
                return text
    for name, value in headers:
        if name == b"traceparent":
            match = _TRACEPARENT.fullmatch(value.decode("latin-1").strip())
            if match and match.group(1) != "0" * 32:
                return match.group(1)
    return token_hex(16)


# The node's access line (gateway.web.server.cycle), and uvicorn's when the app runs under it (the ASGI fallback).
ACCESS_LOGGERS = ("gateway.access", "uvicorn.access")
CLIENT_GONE = 499  # the status a request whose client left before its answer began counts under (nginx's)
# When the app got the request: the server logs its access line when the response starts, from the same task.
_request_started: ContextVar[float | None] = ContextVar("gateway_request_started", default=None)


class RequestTimer:
    """Notes when each HTTP request reached the app, for its access line's duration (one clock read), and counts
    requests and websocket handshakes by route, method and status class (gateway.web.node.http_figures)."""

    def __init__(self, app: ASGIApp, figures: HttpFigures | None = None) -> None:
        self.app = app
        self.figures = figures

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket" and self.figures is not None:
            await self._handshake(scope, receive, send, self.figures)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        token = _request_started.set(started)
        bind(request_id=request_id(scope["headers"]))
        status = 0  # none yet: an app that fails before its response starts gets the server's 500

        async def noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, noting_status)
        except ClientDisconnect:
            # A body read after its client left, by code that does not catch it (`@endpoint` does): the client is
            # gone, no server error (the socket layer counts it, gateway_http_clients_gone_total).
            status = status or CLIENT_GONE
        finally:
            _request_started.reset(token)
            if self.figures is not None:
                self.figures.observe(scope, status or 500, time.perf_counter() - started)

    async def _handshake(self, scope: Scope, receive: Receive, send: Send, figures: HttpFigures) -> None:
        """A websocket counts once, when its handshake is answered: a long-lived connection is one request."""
        started = time.perf_counter()
        answered = False

        def answer(status: int) -> None:
            nonlocal answered
            answered = True
            figures.observe(scope, status, time.perf_counter() - started)

        async def noting_answer(message: Message) -> None:
            if not answered:
                kind = message["type"]
                if kind == "websocket.accept":
                    answer(101)
                elif kind == "websocket.http.response.start":
                    answer(message["status"])
                elif kind == "websocket.close":  # before accepting: uvicorn refuses the handshake with 403
                    answer(403)
            await send(message)

        try:
            await self.app(scope, receive, noting_answer)
        finally:
            if not answered:  # the app ended (or failed) without answering: uvicorn sends 500
                answer(500)


class AccessTiming(logging.Filter):
    """Puts the request's time so far (to its response's start) on its access line's record, as `duration`."""

    def filter(self, record: logging.LogRecord) -> bool:
        started = _request_started.get()
        if started is not None:
            record.duration = time.perf_counter() - started
        return True


class JsonLines(logging.Formatter):
    """One JSON object per line (`GATEWAY_LOG_FORMAT=json`), for log pipelines."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.name in ACCESS_LOGGERS and isinstance(record.args, tuple) and len(record.args) == 5:
            # The access line's arguments, in uvicorn's order; the path is redacted already (RedactSecrets).
            client, method, path, http_version, status = record.args
            entry.update(client=client, method=method, path=path, http_version=http_version, status=status)
            duration = getattr(record, "duration", None)
            if duration is not None:
                entry["duration_ms"] = round(duration * 1000, 3)
        context = _bound.get()
        if context:
            entry.update(context)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(level: str, fmt: str) -> None:
    """Every process's logging: one handler on the root (uvicorn's loggers propagate to it), secrets redacted."""
    handler = logging.StreamHandler()
    if fmt == "json":
        formatter: logging.Formatter = JsonLines()
        formatter.converter = time.gmtime
    else:
        formatter = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handler.setFormatter(formatter)
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)  # "warning" works as well as "WARNING"
    if logging.getLogger().level > logging.DEBUG:  # httpx logs a line per request: the simulator's drown the rest
        logging.getLogger("httpx").setLevel(logging.WARNING)
    install_redaction()


def install_redaction() -> None:
    """Attach the filter to every logger that may print a request line, and to their handlers."""
    noise = DropDenialNoise()
    error_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, DropDenialNoise) for f in error_log.filters):
        error_log.addFilter(noise)
    for name in ACCESS_LOGGERS:
        access = logging.getLogger(name)
        if not any(isinstance(f, AccessTiming) for f in access.filters):
            access.addFilter(AccessTiming())
        if not any(isinstance(f, QuietHealthChecks) for f in access.filters):
            access.addFilter(QuietHealthChecks())
    flt = RedactSecrets()
    for name in ("uvicorn", "uvicorn.error", *ACCESS_LOGGERS, "gateway", "gateway.http", ""):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(flt)
        for handler in logger.handlers:
            if not any(isinstance(f, RedactSecrets) for f in handler.filters):
                handler.addFilter(flt)
