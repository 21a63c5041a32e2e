"""`POST /api/ingest/jobs`: a cluster's batch of job reports, authenticated by its own key."""

from __future__ import annotations

import time

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..bus import keys
from ..core.ingest import IngestBatch, InvalidReport, NewAnalysis, NewSubmission, NewTrajectory, SubmissionUpdate
from ..core.team import ClusterFigures, MetricsReport
from ..store.ingest import apply_reports
from .auth import cluster_of_key, key_matches
from .body import BodyTooLarge, read_body
from .runtime import Runtime

_batch_decoder = msgspec.json.Decoder(IngestBatch)
_trajectory_decoder = msgspec.json.Decoder(NewTrajectory)
_analysis_decoder = msgspec.json.Decoder(NewAnalysis)
_metrics_decoder = msgspec.json.Decoder(MetricsReport)
_submission_decoder = msgspec.json.Decoder(NewSubmission)
_update_decoder = msgspec.json.Decoder(SubmissionUpdate)
_encoder = msgspec.json.Encoder()


def error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status)


async def authenticate_cluster(request: Request, runtime: Runtime) -> tuple[int, int] | JSONResponse:
    """(cluster id, team id) for a valid `Authorization: Bearer <cluster key>`, else the 401 to return."""
    auth = request.headers.get("authorization", "")
    key = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
    cluster_id = cluster_of_key(key)
    row = None
    if cluster_id is not None:
        row = await runtime.pool.fetchrow("select team_id, key_hash from clusters where id = $1", cluster_id)
    if cluster_id is None or row is None or not key_matches(key, row["key_hash"]):
        return error(401, "unauthorized", "a valid cluster key is required")
    return cluster_id, row["team_id"]


async def ingest_jobs(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    who = await authenticate_cluster(request, runtime)
    if isinstance(who, JSONResponse):
        return who
    cluster_id, team_id = who
    try:
        body = await read_body(request, runtime.settings.max_body_bytes)
        batch = _batch_decoder.decode(body)
        result = await apply_reports(runtime.pool, cluster_id, team_id, batch)
    except BodyTooLarge as exc:
        return error(413, "too_large", str(exc))
    except msgspec.ValidationError as exc:
        return error(422, "invalid", str(exc))
    except msgspec.DecodeError as exc:
        return error(400, "malformed", f"malformed JSON: {exc}")
    except InvalidReport as exc:
        return error(422, "invalid", str(exc))
    return Response(_encoder.encode(result), media_type="application/json")


async def _decode(request: Request, runtime: Runtime, decoder: msgspec.json.Decoder) -> object | JSONResponse:
    try:
        return decoder.decode(await read_body(request, runtime.settings.max_body_bytes))
    except BodyTooLarge as exc:
        return error(413, "too_large", str(exc))
    except msgspec.ValidationError as exc:
        return error(422, "invalid", str(exc))
    except msgspec.DecodeError as exc:
        return error(400, "malformed", f"malformed JSON: {exc}")


async def ingest_trajectory(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    who = await authenticate_cluster(request, runtime)
    if isinstance(who, JSONResponse):
        return who
    body = await _decode(request, runtime, _trajectory_decoder)
    if isinstance(body, JSONResponse):
        return body
    assert isinstance(body, NewTrajectory)
    new_id = await runtime.pool.fetchval(
        "insert into trajectories (team_id, name) values ($1, $2) returning id", who[1], body.name
    )
    return JSONResponse({"id": new_id})


async def ingest_analysis(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    who = await authenticate_cluster(request, runtime)
    if isinstance(who, JSONResponse):
        return who
    body = await _decode(request, runtime, _analysis_decoder)
    if isinstance(body, JSONResponse):
        return body
    assert isinstance(body, NewAnalysis)
    new_id = await runtime.pool.fetchval(
        "insert into analyses (trajectory_id, plugin) select id, $3 from trajectories where id = $1 and team_id = $2"
        " returning id",
        body.trajectory_id,
        who[1],
        body.plugin,
    )
    if new_id is None:
        return error(422, "invalid", f"trajectory_id: no trajectory {body.trajectory_id} in this cluster's team")
    return JSONResponse({"id": new_id})


async def ingest_metrics(request: Request) -> Response:
    """A cluster's CPU, Memory, Disk and Network, about once a second."""
    runtime: Runtime = request.app.state.runtime
    who = await authenticate_cluster(request, runtime)
    if isinstance(who, JSONResponse):
        return who
    body = await _decode(request, runtime, _metrics_decoder)
    if isinstance(body, JSONResponse):
        return body
    assert isinstance(body, MetricsReport)
    cluster_id, team_id = who
    name = await runtime.pool.fetchval("select name from clusters where id = $1", cluster_id)
    figures = ClusterFigures(
        id=cluster_id, name=name, cpu=body.cpu, memory=body.memory, disk=body.disk, network=body.network, at=time.time()
    )
    async with runtime.redis.pipeline(transaction=False) as pipe:
        pipe.hset(keys.metrics(team_id), str(cluster_id), msgspec.msgpack.encode(figures))
        pipe.sadd(keys.METRICS_TEAMS, team_id)
        await pipe.execute()
    return Response(status_code=204)


async def ingest_submission(request: Request) -> Response:
    """A tool or cluster submits a batch of work; its jobs then name it."""
    runtime: Runtime = request.app.state.runtime
    who = await authenticate_cluster(request, runtime)
    if isinstance(who, JSONResponse):
        return who
    body = await _decode(request, runtime, _submission_decoder)
    if isinstance(body, JSONResponse):
        return body
    assert isinstance(body, NewSubmission)
    team_id = who[1]
    if body.trajectory_id is not None and not await runtime.pool.fetchval(
        "select 1 from trajectories where id = $1 and team_id = $2", body.trajectory_id, team_id
    ):
        return error(422, "invalid", f"trajectory_id: no trajectory {body.trajectory_id} in this cluster's team")
    if body.user_id is not None and not await runtime.pool.fetchval(
        "select 1 from memberships where user_id = $1 and team_id = $2", body.user_id, team_id
    ):
        return error(422, "invalid", f"user_id: no member {body.user_id} of this cluster's team")
    new_id = await runtime.pool.fetchval(
        "insert into submissions (team_id, trajectory_id, user_id, project, title, priority, instance_type, cores,"
        " memory_gb, preemptible, staging) values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) returning id",
        team_id, body.trajectory_id, body.user_id, body.project, body.title, body.priority, body.instance_type,
        body.cores, body.memory_gb, body.preemptible, body.staging,
    )
    return JSONResponse({"id": new_id})


async def update_submission(request: Request) -> Response:
    """The staging cluster moves a submission's data along; the downloading tool marks it downloaded."""
    runtime: Runtime = request.app.state.runtime
    who = await authenticate_cluster(request, runtime)
    if isinstance(who, JSONResponse):
        return who
    body = await _decode(request, runtime, _update_decoder)
    if isinstance(body, JSONResponse):
        return body
    assert isinstance(body, SubmissionUpdate)
    status = await runtime.pool.execute(
        "update submissions set staging = coalesce($3::text, staging),"
        " downloaded_at = case when $4::boolean is null then downloaded_at when $4::boolean then coalesce(downloaded_at, now()) end"
        " where id = $1 and team_id = $2",
        request.path_params["id"], who[1], body.staging, body.downloaded,
    )
    if status == "UPDATE 0":
        return error(404, "not_found", f"no submission {request.path_params['id']} in this cluster's team")
    return Response(status_code=204)
