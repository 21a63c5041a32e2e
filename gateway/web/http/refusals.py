"""The one error an HTTP check raises: `Refused`, which `guards.endpoint` turns into the JSON the caller reads
(`{"error": code, "message": ...}`, with Retry-After when it says when to come back). A module of its own so
that what refuses (guards, the action limits, the quotas, the heavy reads) need not import what reads the runtime.
"""

from __future__ import annotations

from starlette.responses import JSONResponse


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after

    def response(self) -> JSONResponse:
        headers = None if self.retry_after is None else {"Retry-After": str(max(1, round(self.retry_after)))}
        return JSONResponse({"error": self.code, "message": self.message}, self.status, headers=headers)
