"""Whether a cluster's report still applies to a job (the same rules hold in SQL)."""

import msgspec
import pytest

from gateway.core.ingest import (
    MAX_ERROR,
    IngestBatch,
    NewAnalysis,
    NewSubmission,
    NewTrajectory,
    SubmissionUpdate,
    report_applies,
)
from gateway.core.instance_types import InstanceTypes
from gateway.core.team import MetricsReport


@pytest.mark.parametrize(
    ("attempts", "status", "removed", "attempt", "new", "applies"),
    [
        (1, "queued", False, 1, "running", True),
        (1, "running", False, 1, "completed", True),
        (2, "running", False, 1, "failed", False),  # a stale attempt's report
        (1, "completed", False, 1, "running", False),  # terminal sticks
        (1, "failed", False, 1, "completed", False),
        (1, "failed", False, 2, "retrying", True),  # ... unless retried
        (1, "running", False, 1, "queued", False),  # a late queued never undoes running
        (1, "running", False, 1, "retrying", False),
        (1, "running", True, 3, "running", False),  # removed stays removed
    ],
)
def test_report_rules(attempts: int, status: str, removed: bool, attempt: int, new: str, applies: bool) -> None:
    assert report_applies(attempts, status, removed, attempt, new) is applies


# Every body a cluster sends, and the request bodies of the ingest API: no free text without a bound.
CLUSTER_BODIES = [
    IngestBatch,
    NewTrajectory,
    NewAnalysis,
    NewSubmission,
    SubmissionUpdate,
    MetricsReport,
    InstanceTypes,
]


def _unbounded_text(t: msgspec.inspect.Type, path: str, seen: set[type]) -> list[str]:
    if isinstance(t, msgspec.inspect.StrType):
        return [] if t.max_length is not None else [path]
    if isinstance(t, msgspec.inspect.StructType):
        if t.cls in seen:
            return []
        seen.add(t.cls)
        return [p for f in t.fields for p in _unbounded_text(f.type, f"{path}.{f.name}", seen)]
    if isinstance(t, msgspec.inspect.UnionType):
        return [p for member in t.types for p in _unbounded_text(member, path, seen)]
    if isinstance(t, msgspec.inspect.ListType):
        return _unbounded_text(t.item_type, f"{path}[]", seen)
    if isinstance(t, msgspec.inspect.LiteralType | msgspec.inspect.IntType | msgspec.inspect.FloatType):
        return []
    if isinstance(t, msgspec.inspect.BoolType | msgspec.inspect.NoneType):
        return []
    if isinstance(t, msgspec.inspect.DateTimeType):
        return []  # parsed as RFC 3339 into a datetime: no free text
    return [f"{path}: {type(t).__name__}"]  # a kind of field this check does not know: look at it


@pytest.mark.parametrize("body", CLUSTER_BODIES, ids=lambda b: b.__name__)
def test_every_text_a_cluster_sends_has_a_bound(body: type) -> None:
    """Past the bound the answer is 422 naming the field (docs/protocol.md, "Cluster ingest")."""
    assert _unbounded_text(msgspec.inspect.type_info(body), "$", set()) == []


def test_a_job_error_past_its_bound_is_refused_naming_the_field() -> None:
    body = {"jobs": [{"id": 1, "status": "failed", "error": "x" * (MAX_ERROR + 1)}]}
    with pytest.raises(msgspec.ValidationError, match=r"length <= 4000 - at `\$.jobs\[0\].error`"):
        msgspec.json.decode(msgspec.json.encode(body), type=IngestBatch)
    body["jobs"][0]["error"] = "é" * MAX_ERROR  # characters, not bytes
    assert msgspec.json.decode(msgspec.json.encode(body), type=IngestBatch).jobs[0].error == "é" * MAX_ERROR
