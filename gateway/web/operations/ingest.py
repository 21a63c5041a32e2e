"""The clusters' ingest API: jobs, what they refer to (trajectories, analyses, submissions), metrics,
confirmations of actions and the node types a cluster offers."""

from __future__ import annotations

from ...core.control import Confirmation
from ...core.ingest import IngestBatch, IngestResponse, NewAnalysis, NewSubmission, NewTrajectory, SubmissionUpdate
from ...core.instance_types import InstanceTypes
from ...core.team import MetricsReport
from ..http.answers import ConfirmationTaken, Created
from .operation import Operation

ROUTES: list[Operation] = [
    Operation(
        "post",
        "/api/ingest/jobs",
        "ingestJobs",
        "ingest",
        "Create jobs and report on them, all or nothing",
        "cluster",
        IngestBatch,
        IngestResponse,
    ),
    Operation(
        "post",
        "/api/ingest/trajectories",
        "registerTrajectory",
        "ingest",
        "Register a trajectory this cluster stores",
        "cluster",
        NewTrajectory,
        Created,
    ),
    Operation(
        "post",
        "/api/ingest/analyses",
        "registerAnalysis",
        "ingest",
        "Register an analysis of a pipeline run",
        "cluster",
        NewAnalysis,
        Created,
    ),
    Operation(
        "post",
        "/api/ingest/submissions",
        "submitWork",
        "ingest",
        "Submit a batch of work",
        "cluster",
        NewSubmission,
        Created,
    ),
    Operation(
        "post",
        "/api/ingest/submissions/{id}",
        "updateSubmission",
        "ingest",
        "Move a submission's data along, or mark it downloaded",
        "cluster",
        SubmissionUpdate,
        None,
        "no such submission of this cluster (another cluster's, another team's or none: the same answer)",
        conflict="a staging the submission's lifecycle does not reach from where it is (the message names both)",
    ),
    Operation(
        "post",
        "/api/ingest/metrics",
        "reportMetrics",
        "ingest",
        "Report CPU, Memory, Disk and Network",
        "cluster",
        MetricsReport,
        None,
    ),
    Operation(
        "post",
        "/api/ingest/confirmations",
        "confirmCommand",
        "ingest",
        "Confirm the jobs of a command (from the cluster's feed) the cluster acted on; a repeat changes nothing",
        "cluster",
        Confirmation,
        ConfirmationTaken,
        "no such command of this cluster (another cluster's or none: the same answer)",
    ),
    Operation(
        "post",
        "/api/ingest/instance-types",
        "declareInstanceTypes",
        "ingest",
        "Declare the instance types this cluster offers (replaces its list)",
        "cluster",
        InstanceTypes,
        None,
    ),
]
