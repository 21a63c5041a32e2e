"""A person's actions on jobs (Remove Running, retries, the Submissions page's actions and their previews),
the node types a selection may use, and a trajectory's analyses."""

from __future__ import annotations

from ...core.control import ActionPreview, ActionResult, SubmissionsAction
from ...core.instance_types import Offered
from ..answers import Analyses
from .operation import Operation

ROUTES: list[Operation] = [
    Operation(
        "post",
        "/api/trajectories/{id}/remove-running",
        "removeRunningJobs",
        "actions",
        "Remove Running Jobs",
        "user",
        None,
        ActionResult,
    ),
    Operation(
        "get",
        "/api/trajectories/{id}/remove-running/preview",
        "previewRemoveRunningJobs",
        "actions",
        "What Remove Running Jobs would stop, per cluster, for a confirmation; nothing is done",
        "user",
        None,
        ActionPreview,
    ),
    Operation(
        "post",
        "/api/trajectories/{id}/retry-failed",
        "retryFailedJobs",
        "actions",
        "Retry Failed Jobs",
        "user",
        None,
        ActionResult,
    ),
    Operation(
        "post",
        "/api/analyses/{id}/retry-failed",
        "retryFailedFrames",
        "actions",
        "Retry Failed Frames of an analysis",
        "user",
        None,
        ActionResult,
    ),
    Operation(
        "post",
        "/api/submissions/actions",
        "actOnSubmissions",
        "actions",
        "An action of the Submissions page",
        "user",
        SubmissionsAction,
        ActionResult,
    ),
    Operation(
        "post",
        "/api/submissions/actions/preview",
        "previewSubmissionsAction",
        "actions",
        "What a task action would take (tasks per cluster), for a confirmation; nothing is done",
        "user",
        SubmissionsAction,
        ActionPreview,
    ),
    Operation(
        "get",
        "/api/submissions/instance-types",
        "submissionInstanceTypes",
        "actions",
        "The instance types Edit / Instance Type may choose for the submissions named by `?submission=`",
        "user",
        None,
        Offered,
        query=(("submission", "a selected submission's id; repeat for each (at most 1,000)"),),
    ),
    Operation(
        "get",
        "/api/trajectories/{id}/analyses",
        "trajectoryAnalyses",
        "actions",
        "The analysis listing: a trajectory's analyses and their frames, newest first",
        "user",
        None,
        Analyses,
    ),
    Operation(
        "delete",
        "/api/analyses/{id}",
        "deleteAnalysis",
        "actions",
        "Delete analysis: stop its jobs through their clusters and delete its results",
        "user",
        None,
        ActionResult,
        "no such analysis, or it was deleted",
    ),
]
