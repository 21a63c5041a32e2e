"""OpenTelemetry spans of a change's way (gateway.tracing): off, nothing of opentelemetry is loaded and every
call is a shared no-op; on (here with the SDK's in-memory exporter), the ingest span is a child of the request's
traceparent, the relay's publish span a child of (and linked to) the changes' contexts, and each node's delivery
a child of the publish, so the three share one trace."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway import tracing
from gateway.core import envelope

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE_ID}-b7ad6b7169203331-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use(provider)
    try:
        yield exporter
    finally:
        tracing.stop()
        provider.shutdown()


def test_off_every_call_is_the_shared_no_op() -> None:
    assert not tracing.enabled
    assert tracing.ingest(TRACEPARENT, 1, 2, 3) is tracing.NOT_TRACED
    assert tracing.relay_publish([TRACEPARENT], 0, 4) is tracing.NOT_TRACED
    with tracing.ingest(TRACEPARENT, 1, 2, 3) as trace:
        assert trace is None
    tracing.delivered(TRACEPARENT, "team:1", 3, 0)  # nothing to record it with: nothing happens


def test_off_no_process_loads_the_tracing_sdk_or_its_exporter() -> None:
    # (redis-py imports opentelemetry's API and metrics SDK by itself when they are installed, for its own
    # observability, which is off: what gateway.tracing would load is not there.)
    code = (
        "import sys\n"
        "from gateway import tracing\n"
        "import gateway.web.app, gateway.relay.runner, gateway.hub.node, gateway.store.outbox\n"
        "assert not tracing.configure()\n"
        "ours = ('opentelemetry.sdk.trace', 'opentelemetry.exporter', 'opentelemetry.trace.propagation.tracecontext')\n"
        "print(sorted(m for m in sys.modules if m.startswith(ours)))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_ingest_its_relay_publish_and_each_delivery_share_the_requests_trace(
    spans: InMemorySpanExporter,
) -> None:
    with tracing.ingest(TRACEPARENT, 7, 11, 2) as ingest_context:
        assert ingest_context is not None and ingest_context.split("-")[1] == TRACE_ID
    other = "00-11111111111111111111111111111111-2222222222222222-01"  # another request's change in the same cycle
    with tracing.relay_publish([ingest_context, other], 3, 5) as publish_context:
        assert publish_context is not None
    data = envelope.pack(1, 2, b"{}", b"\x80", trace=publish_context)
    traced = envelope.trace_of(data)
    assert traced == publish_context
    tracing.delivered(traced, "team:7", 4, 0)
    tracing.delivered(traced, "trajectory:9", 1, 0)

    ingest, publish, *deliveries = spans.get_finished_spans()
    assert [ingest.name, publish.name, *(d.name for d in deliveries)] == [
        "ingest jobs",
        "relay publish",
        "node deliver",
        "node deliver",
    ]
    assert {format(s.context.trace_id, "032x") for s in (ingest, publish, *deliveries)} == {TRACE_ID}
    assert ingest.parent is not None and format(ingest.parent.span_id, "016x") == "b7ad6b7169203331"
    assert publish.parent is not None and publish.parent.span_id == ingest.context.span_id
    assert [(link.context.trace_id, link.context.span_id) for link in publish.links] == [
        (ingest.context.trace_id, ingest.context.span_id),
        (0x11111111111111111111111111111111, 0x2222222222222222),
    ]
    assert all(d.parent is not None and d.parent.span_id == publish.context.span_id for d in deliveries)
    assert dict(ingest.attributes or {}) == {"gateway.team_id": 7, "gateway.cluster_id": 11, "gateway.jobs": 2}
    assert dict(publish.attributes or {}) == {"gateway.partition": 3, "gateway.messages": 5, "gateway.changes": 2}
    assert dict(deliveries[0].attributes or {}) == {
        "gateway.channel": "team:7",
        "gateway.channel_kind": "team",
        "gateway.connections": 4,
        "gateway.team_id": 7,
    }


def test_an_ingest_with_no_traceparent_starts_a_trace(spans: InMemorySpanExporter) -> None:
    with tracing.ingest(None, 7, 11, 1) as context:
        assert context is not None
    (span,) = spans.get_finished_spans()
    assert span.parent is None and format(span.context.trace_id, "032x") == context.split("-")[1]


def test_a_cycle_with_no_traced_change_records_nothing(spans: InMemorySpanExporter) -> None:
    assert tracing.relay_publish([], 0, 5) is tracing.NOT_TRACED
    assert spans.get_finished_spans() == ()
