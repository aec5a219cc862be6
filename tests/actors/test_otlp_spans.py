"""What a finished call becomes as spans (``tracing.otlp``), checked on exact virtual instants.

The call runs under MockClock through the harness; its finished CallTrace is
then exported by a ``SpanExport`` whose exporter is the SDK's in-memory one,
so the spans are the ones the OTLP exporter would have been handed.
"""

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from switchyard.actors.events import CallTrace
from switchyard.config.telemetry import OtlpExport
from switchyard.protocol.serving.otlp import SCOPE, SpanExport
from switchyard.protocol.serving.otlp_spans import call_spans
from tests.actors.test_midstream import config as midstream_config
from tests.harness import chat, gateway, request

pytestmark = pytest.mark.simulator_history   # reads what the simulated backends saw

OTLP = OtlpExport(endpoint="http://127.0.0.1:9/v1/traces", export_interval=0.05)
ONE = """
backends:
  - {name: a, type: simulated, url: "http://gpu-1.simulated:8000/v1", models: [big], simulation: {latency: 1s}}
"""


async def spans_of(app, reply, otlp=OTLP):
    trace = app.runtime.traces.get(reply.headers[b"x-continuum-request-id"].decode())
    memory = InMemorySpanExporter()
    export = SpanExport(otlp, lambda: app.runtime.snapshot, exporter=memory)
    export.observe(trace)
    export.close()
    return trace, memory.get_finished_spans()


def at(trace, span_time):
    """A span's instant as seconds since the call was accepted."""
    return round(span_time / 1e9 - trace.wall, 3)


async def test_a_mid_stream_recovery_is_a_second_attempt_span_and_an_event_after_the_expired_budget(autojump_clock):
    async with gateway(midstream_config()) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big", stream=True))
        assert reply.status == 200
        trace, spans = await spans_of(app, reply)
    root = next(s for s in spans if s.name == "router.request")
    first, second = sorted((s for s in spans if s is not root), key=lambda s: s.start_time)
    # a: chunks at 1.0, 1.5, 2.0 then silence; chunk_interval 2 s -> b dialed at 4.0
    assert (at(trace, first.start_time), at(trace, first.end_time)) == (0.0, 4.0)
    assert at(trace, second.start_time) == 4.0 and first.status.status_code is StatusCode.ERROR
    assert first.attributes["error.type"] == "chunk_interval"
    assert [(e.name, dict(e.attributes)) for e in first.events] == [("router.budget_expired",
                                                                      {"router.timeout": "chunk_interval"})]
    assert [e.name for e in root.events] == ["router.budget_expired", "router.mid_stream_recovery"]
    recovery = dict(root.events[1].attributes)
    assert (recovery["router.from_backend"], recovery["router.to_backend"], recovery["router.to_model"]) == \
        ("a", "b", "small")
    assert second.attributes["gen_ai.response.model"] == "small" and second.status.status_code is StatusCode.UNSET
    assert root.attributes["gen_ai.response.model"] == "small"


async def test_a_call_that_starts_its_trace_has_a_root_without_parent_and_gen_ai_attributes(autojump_clock):
    async with gateway(ONE) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        trace, spans = await spans_of(app, reply)
    attempt, root = spans   # attempts first, the root last
    assert root.parent is None and root.kind is SpanKind.SERVER and attempt.kind is SpanKind.CLIENT
    assert attempt.parent.span_id == root.context.span_id != attempt.context.span_id
    assert format(root.context.trace_id, "032x") == trace.trace_id
    assert (at(trace, attempt.start_time), at(trace, attempt.end_time), at(trace, root.end_time)) == (0.0, 1.0, 1.0)
    assert attempt.name == "chat big"
    assert (attempt.attributes["server.address"], attempt.attributes["server.port"]) == ("gpu-1.simulated", 8000)
    usage = (root.attributes["gen_ai.usage.input_tokens"], root.attributes["gen_ai.usage.output_tokens"])
    assert usage == trace.spent[:2] and all(n > 0 for n in usage)
    assert root.attributes["router.request_id"] == trace.request_id
    assert root.attributes["http.route"] == "/v1/chat/completions"
    assert "router.client_ref" not in root.attributes   # none sent: absent, never null


async def test_a_call_without_a_trace_exports_nothing(autojump_clock):
    async with gateway("tracing: {enabled: false}\n" + ONE) as app:
        reply = await request(app, "POST", "/v1/chat/completions", chat("big"))
        _, spans = await spans_of(app, reply)
    assert spans == ()


async def test_the_root_ends_at_its_terminal_event_instant_as_the_attempt_that_answered(autojump_clock):
    trace = CallTrace("req_1", "rev", trace_id="0af7651916cd43dd8448eb211c80319c")
    trace.add("accepted", model="big", stream=False)
    trace.attempt = 1
    trace.add("selected", backend="a", model="big", fallback_dial=False, span_id="b7ad6b7169203331")
    autojump_clock.jump(0.1234567)   # the event's t_ms keeps the microsecond: 123.457
    trace.add("completed", backend="a", model="big")
    export = SpanExport(OTLP, lambda: None, exporter=InMemorySpanExporter())
    attempt, root = call_spans(trace, 1, export.resource, SCOPE, lambda backend: None)
    assert attempt.end_time == root.end_time == int((trace.wall + 0.123457) * 1e9)
