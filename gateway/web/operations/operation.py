"""One HTTP route under /api as the OpenAPI document describes it (gateway.web.node.schema writes the document)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Operation:
    """One HTTP route under /api, as documented: who may call it, what it reads and what it answers."""

    method: str
    path: str
    operation_id: str
    tag: str
    summary: str
    who: str  # cluster | user | anyone
    request: Any = None  # the JSON body's Struct
    answer: Any = None  # the 200 body's Struct; None: 204, no body
    not_found: str | None = None  # when it can answer 404
    conflict: str | None = None  # when it can answer 409
    query: tuple[tuple[str, str], ...] = ()  # (name, description) of repeatable integer query parameters
    parameters: tuple[dict[str, Any], ...] = ()  # other query parameters, as OpenAPI parameter objects
    media: str = "application/json"  # the 200 body's type (text/csv: a string, not the Struct's JSON)
