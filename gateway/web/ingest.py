"""The cluster ingest API: job reports, trajectories, analyses, submissions and metrics, each request
authenticated by the cluster's own key and scoped to its team."""

from __future__ import annotations

import time

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ..bus import keys
from ..core.ingest import IngestBatch, InvalidReport, NewAnalysis, NewSubmission, NewTrajectory, SubmissionUpdate
from ..core.team import ClusterFigures, MetricsReport
from ..store.ingest import apply_reports
from .answers import Created, answer
from .guards import Refused, cluster, decode, endpoint, path_id, runtime_of

_batch_decoder = msgspec.json.Decoder(IngestBatch)
_trajectory_decoder = msgspec.json.Decoder(NewTrajectory)
_analysis_decoder = msgspec.json.Decoder(NewAnalysis)
_metrics_decoder = msgspec.json.Decoder(MetricsReport)
_submission_decoder = msgspec.json.Decoder(NewSubmission)
_update_decoder = msgspec.json.Decoder(SubmissionUpdate)
_encoder = msgspec.json.Encoder()


@endpoint
async def ingest_jobs(request: Request) -> Response:
    """`POST /api/ingest/jobs`: a batch of job creations and reports, all or nothing."""
    who = await cluster(request)
    batch = await decode(request, _batch_decoder)
    try:
        result = await apply_reports(runtime_of(request).pool, who.id, who.team_id, batch)
    except InvalidReport as exc:
        raise Refused(422, "invalid", str(exc)) from None
    return Response(_encoder.encode(result), media_type="application/json")


@endpoint
async def ingest_trajectory(request: Request) -> Response:
    """A cluster that stores an uploaded trajectory registers it."""
    who = await cluster(request)
    body = await decode(request, _trajectory_decoder)
    new_id = await runtime_of(request).pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, $2) returning id", who.team_id, body.name
    )
    return answer(Created(new_id))


@endpoint
async def ingest_analysis(request: Request) -> Response:
    """A pipeline run registers each analysis it computes."""
    who = await cluster(request)
    body = await decode(request, _analysis_decoder)
    new_id = await runtime_of(request).pool.fetchval(
        "insert into analyses (trajectory_id, plugin) select id, $3 from trajectories where id = $1 and team_id = $2"
        " returning id",
        body.trajectory_id,
        who.team_id,
        body.plugin,
    )
    if new_id is None:
        raise Refused(422, "invalid", f"trajectory_id: no trajectory {body.trajectory_id} in this cluster's team")
    return answer(Created(new_id))


@endpoint
async def ingest_metrics(request: Request) -> Response:
    """A cluster's CPU, Memory, Disk and Network, about once a second."""
    who = await cluster(request)
    body = await decode(request, _metrics_decoder)
    runtime = runtime_of(request)
    name = await runtime.pool.fetchval("select name from clusters where id = $1", who.id)
    figures = ClusterFigures(
        id=who.id, name=name, cpu=body.cpu, memory=body.memory, disk=body.disk, network=body.network, at=time.time()
    )
    async with runtime.redis.pipeline(transaction=False) as pipe:
        pipe.hset(keys.metrics(who.team_id), str(who.id), msgspec.msgpack.encode(figures))
        pipe.sadd(keys.METRICS_TEAMS, who.team_id)
        await pipe.execute()
    return Response(status_code=204)


@endpoint
async def ingest_submission(request: Request) -> Response:
    """A tool or cluster submits a batch of work; its jobs then name it."""
    who = await cluster(request)
    body = await decode(request, _submission_decoder)
    pool = runtime_of(request).pool
    if body.trajectory_id is not None and not await pool.fetchval(
        "select 1 from trajectories where id = $1 and team_id = $2", body.trajectory_id, who.team_id
    ):
        raise Refused(422, "invalid", f"trajectory_id: no trajectory {body.trajectory_id} in this cluster's team")
    if body.user_id is not None and not await pool.fetchval(
        "select 1 from memberships where user_id = $1 and team_id = $2", body.user_id, who.team_id
    ):
        raise Refused(422, "invalid", f"user_id: no member {body.user_id} of this cluster's team")
    new_id = await pool.fetchval(
        "insert into submissions (team_id, trajectory_id, user_id, project, title, priority, instance_type, cores,"
        " memory_gb, preemptible, staging, cluster_id) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
        " returning id",
        who.team_id,
        body.trajectory_id,
        body.user_id,
        body.project,
        body.title,
        body.priority,
        body.instance_type,
        body.cores,
        body.memory_gb,
        body.preemptible,
        body.staging,
        who.id,  # the cluster that stages and runs it
    )
    return answer(Created(new_id))


@endpoint
async def update_submission(request: Request) -> Response:
    """The staging cluster moves a submission's data along; the downloading tool marks it downloaded."""
    who = await cluster(request)
    submission_id = path_id(request)
    body = await decode(request, _update_decoder)
    pool = runtime_of(request).pool
    status = await pool.execute(
        "update submissions set staging = coalesce($3::text, staging),"
        " downloaded_at = case when $4::boolean is null then downloaded_at"
        " when $4::boolean then coalesce(downloaded_at, now()) end"
        " where id = $1 and team_id = $2",
        submission_id,
        who.team_id,
        body.staging,
        body.downloaded,
    )
    # UPDATE 0 is also a change to what it already was (submissions_stamp skips those): only a submission
    # not in the team is refused, and another team's reads as one that does not exist.
    if status == "UPDATE 0" and not await pool.fetchval(
        "select 1 from submissions where id = $1 and team_id = $2", submission_id, who.team_id
    ):
        raise Refused(404, "not_found", f"id: no submission {submission_id} in this cluster's team")
    return Response(status_code=204)
