"""The cluster ingest API: job reports, trajectories, analyses, submissions, metrics and confirmations of
commands, each request authenticated by the cluster's own key and scoped to its team (or its own commands)."""

from __future__ import annotations

import logging
import time

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ... import tracing
from ...bus.errors import BusError
from ...core.control import Confirmed, confirmation_decoder
from ...core.ingest import IngestBatch, InvalidReport, NewAnalysis, NewSubmission, NewTrajectory, SubmissionUpdate
from ...core.lifecycle import staging_reachable, staging_refusal
from ...core.team import ClusterFigures, MetricsReport
from ...store import clusters, commands, ingest, queries, submissions
from ..http.answers import ConfirmationTaken, Created, answer
from ..http.guards import Refused, cluster, decode, endpoint, path_id, runtime_of
from ..runtime import Runtime
from .quotas import Creations

_batch_decoder = msgspec.json.Decoder(IngestBatch)
_trajectory_decoder = msgspec.json.Decoder(NewTrajectory)
_analysis_decoder = msgspec.json.Decoder(NewAnalysis)
_metrics_decoder = msgspec.json.Decoder(MetricsReport)
_submission_decoder = msgspec.json.Decoder(NewSubmission)
_update_decoder = msgspec.json.Decoder(SubmissionUpdate)
_encoder = msgspec.json.Encoder()

log = logging.getLogger(__name__)


def creations(runtime: Runtime) -> Creations:
    assert runtime.creations is not None  # the app makes it with the runtime
    return runtime.creations


@endpoint
async def ingest_jobs(request: Request) -> Response:
    """`POST /api/ingest/jobs`: a batch of job creations and reports, all or nothing. Traced (gateway.tracing),
    its span is a child of the request's `traceparent`, and the changes it writes carry the span's context."""
    who = await cluster(request)
    batch = await decode(request, _batch_decoder)
    runtime = runtime_of(request)
    span = tracing.ingest(request.headers.get("traceparent"), who.team_id, who.id, len(batch.jobs))
    try:
        with (
            span as trace,
            creations(runtime).spending("jobs", who.team_id, sum(1 for r in batch.jobs if r.id is None)),
        ):
            result = await ingest.apply_reports(runtime.pool, who.id, who.team_id, batch, trace)
    except InvalidReport as exc:
        raise Refused(422, "invalid", str(exc)) from None
    return Response(_encoder.encode(result), media_type="application/json")


@endpoint
async def ingest_trajectory(request: Request) -> Response:
    """A cluster that stores an uploaded trajectory registers it."""
    who = await cluster(request)
    body = await decode(request, _trajectory_decoder)
    runtime = runtime_of(request)
    with creations(runtime).spending("trajectories", who.team_id, 1):
        new_id = await ingest.create_trajectory(runtime.pool, who.team_id, body.name)
    return answer(Created(new_id))


@endpoint
async def ingest_analysis(request: Request) -> Response:
    """A pipeline run registers each analysis it computes."""
    who = await cluster(request)
    body = await decode(request, _analysis_decoder)
    runtime = runtime_of(request)
    with creations(runtime).spending("trajectories", who.team_id, 1):
        new_id = await ingest.create_analysis(runtime.pool, who.team_id, body.trajectory_id, body.plugin)
        if new_id is None:
            raise Refused(422, "invalid", f"trajectory_id: no trajectory {body.trajectory_id} in this cluster's team")
    return answer(Created(new_id))


@endpoint
async def ingest_metrics(request: Request) -> Response:
    """A cluster's CPU, Memory, Disk and Network, about once a second."""
    who = await cluster(request)
    body = await decode(request, _metrics_decoder)
    runtime = runtime_of(request)
    name = await clusters.name_of(runtime.pool, who.id)
    figures = ClusterFigures(
        id=who.id, name=name, cpu=body.cpu, memory=body.memory, disk=body.disk, network=body.network, at=time.time()
    )
    await runtime.broker.figures.report(who.team_id, figures)
    return Response(status_code=204)


@endpoint
async def ingest_submission(request: Request) -> Response:
    """A tool or cluster submits a batch of work; its jobs then name it."""
    who = await cluster(request)
    body = await decode(request, _submission_decoder)
    runtime = runtime_of(request)
    pool = runtime.pool
    if body.trajectory_id is not None and not await ingest.has_trajectory(pool, who.team_id, body.trajectory_id):
        raise Refused(422, "invalid", f"trajectory_id: no trajectory {body.trajectory_id} in this cluster's team")
    if body.user_id is not None and not await queries.is_member(pool, body.user_id, who.team_id):
        raise Refused(422, "invalid", f"user_id: no member {body.user_id} of this cluster's team")
    with creations(runtime).spending("trajectories", who.team_id, 1):
        new_id = await submissions.create(pool, who.team_id, who.id, body)
    return answer(Created(new_id))


@endpoint
async def update_submission(request: Request) -> Response:
    """The staging cluster moves a submission's data along (as the transition table allows: gateway.core.lifecycle);
    the downloading tool, with that cluster's key, marks it downloaded. Another cluster's submission is refused
    as a missing one: the refusal tells nothing of what other clusters stage."""
    who = await cluster(request)
    submission_id = path_id(request)
    body = await decode(request, _update_decoder)
    pool = runtime_of(request).pool
    before = await submissions.update_staging(
        pool, submission_id, who.team_id, who.id, body.staging, body.downloaded, staging_reachable
    )
    if before is None:
        raise Refused(404, "not_found", f"id: no submission {submission_id} of this cluster")
    if body.staging is not None and (refusal := staging_refusal(submission_id, before, body.staging)):
        raise Refused(409, "conflict", refusal)  # a move the transition table does not make: nothing written
    return Response(status_code=204)


@endpoint
async def ingest_confirmation(request: Request) -> Response:
    """`POST /api/ingest/confirmations`: the jobs of one of its commands the cluster acted on. Recorded once: a
    repeated confirmation changes nothing (`repeated: true`). Another cluster's command, or one that does not
    exist: the same 404; jobs the command did not name: 422, and nothing recorded."""
    who = await cluster(request)
    body = await decode(request, confirmation_decoder)
    runtime = runtime_of(request)
    outcome = await commands.confirm(runtime.pool, who.id, body.command, body.jobs)
    if outcome.missing:
        raise Refused(404, "not_found", f"command: no command {body.command[:100]!r} of this cluster")
    if outcome.not_asked:
        more = f" (and {len(outcome.not_asked) - 1} more)" if len(outcome.not_asked) > 1 else ""
        raise Refused(422, "invalid", f"jobs: command {body.command!r} did not name job {outcome.not_asked[0]}{more}")
    if outcome.reply_to:
        try:  # the waiting node hears it now; missed (a failover), it reads it from PostgreSQL at its deadline
            await runtime.broker.commands.confirm(outcome.reply_to, _encoder.encode(Confirmed(who.id, body.jobs)))
        except BusError as exc:
            log.warning("confirmation of %s recorded, not announced: %s", body.command, type(exc).__name__)
    return answer(ConfirmationTaken(outcome.repeated))
