"""Keep tokens out of the logs: uvicorn logs websocket and HTTP paths with their query strings."""

from __future__ import annotations

import json
import logging
import re
import time
from urllib.parse import unquote

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
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args) if isinstance(
                record.args, tuple
            ) else record.args
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


class DropDenialNoise(logging.Filter):
    """uvicorn's sans-I/O websocket protocol logs this error after every handshake we refuse with an HTTP
    response (a denial response does not mark its handshake complete); our endpoint always accepts or
    refuses, so the line only misleads whoever reads the logs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "ASGI callable returned without completing handshake."


class JsonLines(logging.Formatter):
    """One JSON object per line (`GATEWAY_LOG_FORMAT=json`), for log pipelines."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


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
    flt = RedactSecrets()
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "gateway", ""):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(flt)
        for handler in logger.handlers:
            if not any(isinstance(f, RedactSecrets) for f in handler.filters):
                handler.addFilter(flt)
