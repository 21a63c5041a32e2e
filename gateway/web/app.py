"""The Starlette application of a gateway node."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from .. import tracing
from ..bus.broker import RedisBroker
from ..config import Settings, check_secret
from ..core.admission import Admission
from ..core.ratelimit import KeyedRate
from ..credentials import VerifiedTokens
from ..hub.node import Node
from ..hub.presence import PresenceBoard
from ..hub.revocations import SessionRevocations
from ..hub.sessions import SessionsSeen
from ..hub.user_sockets import SocketsHeld
from ..resources import FRONTEND
from ..store.access import NodeAccess
from ..store.connections import open_pool
from .admin.platform_admin import (
    admin_create_team,
    admin_create_user,
    admin_remove_team,
    admin_remove_user,
    admin_teams,
    admin_users,
)
from .admin.team_admin import add_cluster, add_member, remove_cluster, remove_member, rotate_cluster_key, team_clusters
from .cluster.heard import Hearing
from .cluster.ingest import (
    ingest_analysis,
    ingest_confirmation,
    ingest_jobs,
    ingest_metrics,
    ingest_submission,
    ingest_trajectory,
    update_submission,
)
from .cluster.quotas import Creations
from .http.headers import SecurityHeaders
from .http.heavy import HeavyReads
from .http.hosts import HostCheck
from .http.inflight import ActionLimits
from .node.garbage import CollectorPauses, MemoryReturn
from .node.health_port import HealthPortOnly
from .node.http_figures import HttpFigures
from .node.leaving import Leaving
from .node.logs import RequestTimer, install_redaction
from .node.loop_lag import LoopLag
from .node.metrics import Readiness, healthz, metrics, readyz
from .node.schema import asyncapi_document, openapi_document
from .people.account import account, revoke_session, set_preferences
from .people.session import confirm_sign_in, demo_sign_in, demo_users, index, renew, sign_out
from .runtime import Runtime
from .team.actions import (
    preview_remove_running,
    preview_retry_failed,
    remove_running,
    retry_failed,
    retry_failed_frames,
)
from .team.activity import team_activity, team_activity_csv
from .team.analyses import delete_analysis, trajectory_analyses
from .team.api import me, team_active_trajectories, team_members, team_trajectories, trajectory
from .team.instance_types import declare_instance_types, submission_instance_types
from .team.lifecycle import lifecycle
from .team.saved_views import arrange_views, create_view, delete_view, list_views, set_default_view, update_view
from .team.submission_windows import team_projects, team_submissions, team_submissions_csv
from .team.submissions import preview_submissions_action, submissions_action
from .websocket.handshake_gate import HandshakeGate
from .websocket.ws import websocket_endpoint

log = logging.getLogger("gateway")
CLOSE_BUDGET = 10.0  # seconds each step of the app's shutdown may take before the node goes on without it


async def closing(what: str, step: Awaitable[None]) -> bool:
    """One step of the app's shutdown, within CLOSE_BUDGET seconds: a step that takes longer is logged and left
    (the process is on its way out: a stuck step must not keep it, and the next deploy, waiting); False then."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(CLOSE_BUDGET):
            await step
    except TimeoutError:
        log.error("shutting down: %s did not close within %g s; going on without it", what, CLOSE_BUDGET)
        return False
    took = time.monotonic() - started
    if took > 1:
        log.warning("shutting down: %s took %.1f s to close", what, took)
    return True


def create_app(settings: Settings) -> Starlette:
    check_secret(settings.secret)  # the same check as every command that signs tokens

    # The handshake's gate: the node's HTTP protocol asks it before any websocket work (gateway.web.serving
    # passes it on from app.state), following how late the event loop runs.
    admission = Admission(settings.admission_rate, settings.admission_share)
    tokens = VerifiedTokens(settings.secret)  # the handshake's gate and the app's guards share what is verified
    loop_lag = LoopLag(admission)
    pauses = CollectorPauses()

    lifespan = _lifespan(settings, admission, tokens, loop_lag, pauses)
    http_figures = HttpFigures()  # /metrics reads them (gateway.web.node.metrics)
    middleware = _middleware(settings, http_figures)
    app = Starlette(routes=_routes(), lifespan=lifespan, middleware=middleware)
    app.state.http_figures = http_figures
    app.state.handshakes = HandshakeGate(admission, tokens, settings.session_max_age)
    app.state.leaving = Leaving()  # the server marks it on SIGTERM (gateway.web.node.leaving); /readyz reads it
    app.state.readiness = Readiness()  # checked every second: the health port's thread answers /readyz from it
    return app


def _lifespan(
    settings: Settings, admission: Admission, tokens: VerifiedTokens, loop_lag: LoopLag, pauses: CollectorPauses
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """The node's startup and shutdown: PostgreSQL's pool, the broker, the hub and what watches it, handed to the
    request handlers as the app's Runtime; closed in reverse, each step within CLOSE_BUDGET."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        install_redaction()
        tracing.configure()  # OTEL_EXPORTER_OTLP_ENDPOINT set: spans of ingest and delivery (in each worker)
        pool = await open_pool(settings.database_url, min_size=1, max_size=10)
        broker = RedisBroker.connect(settings.redis_url, settings.redis_cluster, settings.partitions)
        node = Node(
            NodeAccess(pool),
            broker,
            settings.max_subscriptions,
            presence=PresenceBoard(broker.presence, enabled=not settings.single_user),
            keepalive=settings.keepalive,
        )
        revocations = SessionRevocations(pool, node.connections, settings.session_max_age)
        node.on_revocation = revocations.apply
        await revocations.start()
        sessions = SessionsSeen(pool, node.connections)
        sessions.start()
        sockets_held = SocketsHeld(broker.user_sockets, settings.max_connections_per_user)
        await node.start()
        memory = MemoryReturn()  # gives freed memory back once many connections left (gateway.web.node.garbage)
        http_rate = KeyedRate(settings.http_rate, settings.http_burst) if settings.http_rate > 0 else None
        actions = ActionLimits(settings.max_actions_per_user, settings.max_actions_per_team, settings.command_timeout)
        app.state.runtime = Runtime(
            settings=settings,
            pool=pool,
            broker=broker,
            node=node,
            actions=actions,
            admission=admission,
            loop_lag=loop_lag,
            collector=pauses,
            memory=memory,
            revocations=revocations,
            sessions=sessions,
            http_rate=http_rate,
            hearing=Hearing(settings.cluster_silent_after),
            tokens=tokens,
            creations=Creations(settings.max_new_jobs_per_hour, settings.max_new_trajectories_per_hour),
            sockets_held=sockets_held,
            heavy=HeavyReads(
                settings.max_heavy_reads_per_user,
                settings.max_heavy_reads,
                settings.max_exports_per_user,
                settings.max_exports,
            ),
        )
        pauses.start()  # after the startup's objects are made: they are frozen (gateway.web.node.garbage)
        watching = asyncio.create_task(loop_lag.run(), name="loop-lag")
        renewing = asyncio.create_task(sockets_held.run(), name="user-sockets")
        returning = asyncio.create_task(memory.run(node), name="memory-return")
        settling = asyncio.create_task(pauses.run(), name="gc-settle")  # connections frozen once they live on
        tasks = [watching, renewing, returning, settling]
        if settings.health_port:  # its thread answers /readyz from these checks (gateway.web.node.health_port)
            tasks.append(asyncio.create_task(app.state.readiness.run(app.state.runtime), name="readiness"))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            pauses.stop()
            await closing("the hub", node.stop())
            await closing("the per-user socket counts", sockets_held.clear())
            await closing("sessions' last seen", sessions.stop())
            await closing("revocations", revocations.stop())
            await closing("the Redis connections and cluster commands", broker.aclose())
            if not await closing("the PostgreSQL pool", pool.close()):
                pool.terminate()

    return lifespan


def _routes() -> list[BaseRoute]:
    """Every HTTP and websocket route of a node, then the frontend's files (a missing folder fails here)."""
    routes: list[BaseRoute] = [
        WebSocketRoute("/ws", websocket_endpoint),
        Route("/api/ingest/jobs", ingest_jobs, methods=["POST"]),
        Route("/api/ingest/trajectories", ingest_trajectory, methods=["POST"]),
        Route("/api/ingest/analyses", ingest_analysis, methods=["POST"]),
        Route("/api/me", me),
        Route("/api/teams/{id:int}/members", team_members),
        Route("/api/teams/{id:int}/members", add_member, methods=["POST"]),
        Route("/api/teams/{id:int}/members/{user:int}", remove_member, methods=["DELETE"]),
        Route("/api/teams/{id:int}/clusters", team_clusters),
        Route("/api/teams/{id:int}/clusters", add_cluster, methods=["POST"]),
        Route("/api/teams/{id:int}/clusters/{cluster:int}/key", rotate_cluster_key, methods=["POST"]),
        Route("/api/teams/{id:int}/clusters/{cluster:int}", remove_cluster, methods=["DELETE"]),
        Route("/api/ingest/metrics", ingest_metrics, methods=["POST"]),
        Route("/api/ingest/confirmations", ingest_confirmation, methods=["POST"]),
        Route("/api/ingest/submissions", ingest_submission, methods=["POST"]),
        Route("/api/ingest/submissions/{id:int}", update_submission, methods=["POST"]),
        Route("/api/admin/teams", admin_teams),
        Route("/api/admin/teams", admin_create_team, methods=["POST"]),
        Route("/api/admin/teams/{id:int}", admin_remove_team, methods=["DELETE"]),
        Route("/api/admin/users", admin_users),
        Route("/api/admin/users", admin_create_user, methods=["POST"]),
        Route("/api/admin/users/{id:int}", admin_remove_user, methods=["DELETE"]),
        Route("/api/trajectories/{id:int}/remove-running", remove_running, methods=["POST"]),
        Route("/api/trajectories/{id:int}/remove-running/preview", preview_remove_running),
        Route("/api/trajectories/{id:int}/retry-failed", retry_failed, methods=["POST"]),
        Route("/api/trajectories/{id:int}/retry-failed/preview", preview_retry_failed),
        Route("/api/analyses/{id:int}/retry-failed", retry_failed_frames, methods=["POST"]),
        Route("/api/submissions/actions", submissions_action, methods=["POST"]),
        Route("/api/submissions/actions/preview", preview_submissions_action, methods=["POST"]),
        Route("/api/submissions/instance-types", submission_instance_types),
        Route("/api/ingest/instance-types", declare_instance_types, methods=["POST"]),
        Route("/api/trajectories/{id:int}", trajectory),
        Route("/api/trajectories/{id:int}/analyses", trajectory_analyses),
        Route("/api/analyses/{id:int}", delete_analysis, methods=["DELETE"]),
        Route("/api/teams/{id:int}/trajectories", team_trajectories),
        Route("/api/teams/{id:int}/trajectories/active", team_active_trajectories),
        Route("/api/teams/{id:int}/submissions", team_submissions),
        Route("/api/teams/{id:int}/submissions.csv", team_submissions_csv),
        Route("/api/teams/{id:int}/projects", team_projects),
        Route("/api/teams/{id:int}/activity", team_activity),
        Route("/api/teams/{id:int}/activity.csv", team_activity_csv),
        Route("/api/teams/{id:int}/views", list_views),
        Route("/api/teams/{id:int}/views", create_view, methods=["POST"]),
        Route("/api/teams/{id:int}/views/default", set_default_view, methods=["PUT"]),
        Route("/api/teams/{id:int}/views/order", arrange_views, methods=["PUT"]),
        Route("/api/teams/{id:int}/views/{view:int}", update_view, methods=["PUT"]),
        Route("/api/teams/{id:int}/views/{view:int}", delete_view, methods=["DELETE"]),
        Route("/api/sign-in/users", demo_users),
        Route("/api/sign-in", demo_sign_in, methods=["POST"]),
        Route("/api/sign-out", sign_out, methods=["POST"]),
        Route("/api/account", account),
        Route("/api/account/sessions/{id:int}/revoke", revoke_session, methods=["POST"]),
        Route("/api/account/preferences", set_preferences, methods=["PUT"]),
        Route("/sign-in", confirm_sign_in, methods=["POST"]),  # the sign-in link's confirmation page posts here
        Route("/api/session/renew", renew, methods=["POST"]),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics),
        Route("/asyncapi.json", asyncapi_document),
        Route("/openapi.json", openapi_document),
        Route("/", index),
        Route("/submissions", index),
        Route("/submissions/lifecycle.svg", lifecycle),
    ]
    routes.append(
        Mount("/", StaticFiles(directory=FRONTEND, html=True), name="frontend")
    )  # a missing folder fails here
    return routes


def _middleware(settings: Settings, http_figures: HttpFigures) -> list[Middleware]:
    """What every request passes through, outermost first."""
    return [
        Middleware(RequestTimer, figures=http_figures),
        Middleware(SecurityHeaders),
        Middleware(HostCheck, allowed=settings.hosts),  # a 421 is timed and has headers
        Middleware(HealthPortOnly, port=settings.health_port),  # the health port: health and metrics only
    ]
