"""OpenTelemetry traces of a change's way: the ingest request, the relay cycle that publishes it, each node's
delivery of it. The only module that imports opentelemetry, and only when tracing is on.

Off (no `OTEL_EXPORTER_OTLP_ENDPOINT`), `enabled` is False, nothing of opentelemetry is imported, and every
caller tests that flag (or gets `NOT_TRACED`, a shared no-op context) before doing anything: the hot paths pay
one attribute read. On, `configure` sets up the SDK with the OTLP/HTTP exporter (the `otel` extra); tests hand
`use` a provider of their own (the SDK's in-memory exporter).

A trace's context travels as a W3C `traceparent` string: the request's header, the outbox row's
`trace_context` column (sql/020_trace_context.sql), the bus envelope's header (gateway.core.envelope).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

enabled = False  # whether spans are recorded: read on every hot path, so a plain module attribute
_tracer: Any = None
_propagator: Any = None

NOT_TRACED: contextlib.AbstractContextManager[str | None] = contextlib.nullcontext(None)
MAX_LINKS = 128  # the SDK's default bound on a span's links: a cycle of many requests links to the newest ones


def configure(service: str = "jobs-gateway") -> bool:
    """Turn tracing on when `OTEL_EXPORTER_OTLP_ENDPOINT` is set (the exporter reads it and the other standard
    OTEL_EXPORTER_OTLP_* settings itself); whether it is on. Safe to call more than once."""
    if enabled or not os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return enabled
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: no traces"
            " (pip install 'jobs-gateway[otel]')"
        )
        return False
    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": service}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    use(provider)
    log.info("tracing on: spans exported by OTLP to %s", os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"])
    return True


def use(provider: Any) -> None:
    """Record spans with `provider` (an SDK TracerProvider) from now on."""
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    global enabled, _tracer, _propagator
    _tracer = provider.get_tracer("gateway")
    _propagator = TraceContextTextMapPropagator()
    enabled = True


def stop() -> None:
    """Record no more spans (tests)."""
    global enabled, _tracer
    enabled, _tracer = False, None


def _context(traceparent: str | None) -> Any:
    return _propagator.extract({"traceparent": traceparent}) if traceparent else None


def _traceparent(span: Any) -> str | None:
    from opentelemetry import trace

    carrier: dict[str, str] = {}
    _propagator.inject(carrier, context=trace.set_span_in_context(span))
    return carrier.get("traceparent")


@contextlib.contextmanager
def _span(name: str, parent: Any, links: list[Any], attributes: dict[str, Any]) -> Iterator[str | None]:
    from opentelemetry.trace import SpanKind

    kind = SpanKind.SERVER if name.startswith("ingest") else SpanKind.PRODUCER
    with _tracer.start_as_current_span(name, context=parent, kind=kind, links=links, attributes=attributes) as span:
        yield _traceparent(span)


def ingest(
    traceparent: str | None, team_id: int, cluster_id: int, jobs: int
) -> contextlib.AbstractContextManager[str | None]:
    """The span of an ingest request, a child of the request's `traceparent` (a new trace without one); it gives
    its own traceparent, which the request's changes carry (None: off)."""
    if not enabled:
        return NOT_TRACED
    attributes = {"gateway.team_id": team_id, "gateway.cluster_id": cluster_id, "gateway.jobs": jobs}
    return _span("ingest jobs", _context(traceparent), [], attributes)


def relay_publish(
    traceparents: list[str], partition: int, messages: int
) -> contextlib.AbstractContextManager[str | None]:
    """The span of a relay cycle's publish of the changes whose contexts are `traceparents`: linked to each, and a
    child of the first (so that one request's change, the usual case, is one trace from its request to the
    browsers). It gives its own traceparent, which every envelope of the cycle carries to the nodes."""
    if not enabled or not traceparents:
        return NOT_TRACED
    from opentelemetry import trace

    contexts = [_context(t) for t in traceparents[:MAX_LINKS]]
    links = [trace.Link(trace.get_current_span(c).get_span_context()) for c in contexts]
    attributes = {"gateway.partition": partition, "gateway.messages": messages, "gateway.changes": len(traceparents)}
    return _span("relay publish", contexts[0], links, attributes)


def delivered(traceparent: str, channel: str, connections: int, started_ns: int) -> None:
    """A node's delivery of one bus message to its local subscribers, begun at `started_ns` (time.time_ns()), a
    child of the relay's publish span."""
    if not enabled:
        return
    from opentelemetry.trace import SpanKind

    kind, _, rest = channel.partition(":")
    attributes: dict[str, Any] = {
        "gateway.channel": channel,
        "gateway.channel_kind": kind,
        "gateway.connections": connections,
    }
    team = rest.partition(":")[0]
    if kind.startswith("team") and team.isdigit():
        attributes["gateway.team_id"] = int(team)
    span = _tracer.start_span(
        "node deliver",
        context=_context(traceparent),
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        start_time=started_ns,
    )
    span.end(end_time=time.time_ns())
