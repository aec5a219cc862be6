"""What one finished call becomes in OpenTelemetry: a ``router.request`` span and one span per attempt (and
what an MCP tool call becomes: one ``execute_tool`` span, ``tool_span``).

Built after the fact from the call's ``CallTrace`` (its route events, with
their instants), never while the call runs: nothing is started across an
``await`` or a ``yield``, no OpenTelemetry context is attached, and every
span is made whole (explicit ids, parent and start/end timestamps) as an
SDK ``ReadableSpan`` for the export's processor.

The tree:

- ``router.request`` (kind SERVER): the call. Its parent is the client's
  ``traceparent`` span when one came in; its trace id is the call's (the one
  every upstream header carries). Events: ``router.retry``,
  ``router.fallback``, ``router.mid_stream_recovery``,
  ``router.budget_expired``, ``router.deduplicated``.
- ``{operation} {model}`` (kind CLIENT), one per attempt: its span id is the
  one the attempt sent upstream in its ``traceparent``, so the backend's own
  server span is its child.

Attributes follow OpenTelemetry's GenAI conventions where they fit
(``gen_ai.*``, ``server.address``) plus the gateway's ``router.*``. Only ids,
names, numbers and failure kinds go in: never prompt or answer text, nor an
upstream error's message.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable
from urllib.parse import urlsplit

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from switchyard.actors.events import CallTrace, Step, event_ms
from switchyard.actors.ledger.entries import endpoint_of, outcome
from switchyard.actors.mcp.records import ToolCall

ROOT = "router.request"
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
# gen_ai.operation.name by the call's endpoint (the ledger's names).
OPERATIONS = {"chat": "chat", "messages": "chat", "responses": "chat", "completions": "text_completion",
              "embeddings": "embeddings", "/v1/realtime": "realtime",
              # no GenAI convention names these yet: the audio API's own words
              "audio_transcriptions": "transcription", "audio_translations": "translation", "audio_speech": "speech"}
Address = Callable[[str], "tuple[str, int | None] | None"]   # backend name -> (host, port), if known


def _ns(trace: CallTrace, seconds: float) -> int:
    """A call-relative instant (seconds since accepted) as Unix nanoseconds."""
    return int((trace.wall + seconds) * 1e9)


def _at(trace: CallTrace, step: Step) -> int:
    return _event_ns(trace, step[1])


def _event_ns(trace: CallTrace, seconds: float) -> int:
    """A call-relative instant as a route event's ``t_ms`` says it (to the microsecond), in Unix nanoseconds:
    the root and the attempt that ends the call then end at the same instant."""
    return _ns(trace, event_ms(seconds) / 1000)


def _present(attributes: dict[str, Any]) -> dict[str, Any]:
    """Attributes without the absent ones (OpenTelemetry has no null)."""
    return {k: v for k, v in attributes.items() if v is not None}


def call_spans(trace: CallTrace, root_id: int, resource: Resource, scope: InstrumentationScope,
               address: Address) -> list[ReadableSpan]:
    """The call's spans, attempts first and the root last; ``trace.trace_id`` must be set.

    Read from the trace's compact steps (event, instant, attempt, backend,
    model, detail): no event dicts are built.
    """
    assert trace.trace_id is not None
    trace_id = int(trace.trace_id, 16)
    root = SpanContext(trace_id, root_id, is_remote=False, trace_flags=SAMPLED)
    parent = None
    if trace.parent_id is not None:
        parent = SpanContext(trace_id, int(trace.parent_id, 16), is_remote=True,
                             trace_flags=TraceFlags(int(trace.flags or "01", 16)))
    operation = OPERATIONS.get(endpoint_of(trace.route), "chat")
    spans = [_attempt(trace, i, root, resource, scope, operation, address)
             for i, (event, _, _, _, _, detail) in enumerate(trace.steps)
             if event == "selected" and detail and detail.get("span_id")]
    spans.append(_root(trace, root, parent, resource, scope, operation))
    return spans


def _root(trace: CallTrace, ctx: SpanContext, parent: SpanContext | None, resource: Resource,
          scope: InstrumentationScope, operation: str) -> ReadableSpan:
    steps = trace.steps
    status, code = outcome(trace)
    accepted = steps[0] if steps and steps[0][0] == "accepted" else None
    answered = next((s for s in reversed(steps) if s[0] == "selected"), None)
    spent = trace.spent or (None, None, None)
    end = trace.ended if trace.ended is not None else (steps[-1][1] if steps else 0.0)
    attributes = _present({
        "router.request_id": trace.request_id, "router.client_ref": trace.client_ref,
        "router.x_request_id": trace.x_request_id, "router.route_revision": trace.revision,
        "router.attempts": trace.attempt, "router.terminal_status": trace.terminal, "router.cost": spent[2],
        "http.route": trace.route, "http.response.status_code": status, "error.type": code,
        "gen_ai.operation.name": operation,
        "gen_ai.request.model": accepted[4] if accepted is not None else None,
        "gen_ai.response.model": answered[4] if answered is not None and trace.terminal == "completed" else None,
        "gen_ai.usage.input_tokens": spent[0] if spent[0] else None,
        "gen_ai.usage.output_tokens": spent[1] if spent[1] else None,
        "router.stream": (accepted[5] or {}).get("stream") if accepted is not None else None})
    failed = trace.terminal == "failed" and status >= 400
    return ReadableSpan(
        ROOT, ctx, parent, resource, attributes, tuple(_root_events(trace)), kind=SpanKind.SERVER,
        status=Status(StatusCode.ERROR, code) if failed else Status(StatusCode.UNSET),
        start_time=_ns(trace, 0.0), end_time=_event_ns(trace, end), instrumentation_scope=scope)


def _root_events(trace: CallTrace) -> Iterable[Event]:
    previous: Step | None = None
    for step in trace.steps:
        kind, _, attempt, backend, model, detail = step
        d = detail or {}
        if kind == "retry_scheduled":
            yield Event("router.retry", _present({
                "router.backend": backend, "gen_ai.request.model": model, "router.attempt": attempt,
                "router.delay_ms": d.get("delay_ms")}), _at(trace, step))
        elif kind == "route_changed":
            name = "router.mid_stream_recovery" if d.get("mid_stream") else "router.fallback"
            yield Event(name, _present({
                "router.from_backend": d.get("from_backend"), "router.from_model": d.get("from_model"),
                "router.to_backend": backend, "router.to_model": model, "router.reason": d.get("reason"),
                "router.mode": d.get("mode")}), _at(trace, step))
        elif kind == "attempt_failed" and d.get("kind") == "timeout":
            yield Event("router.budget_expired", _present({
                "router.timeout": d.get("timeout"), "router.backend": backend, "router.attempt": attempt}),
                _at(trace, step))
        elif kind == "failed" and d.get("code") == "timeout" and not (
                previous is not None and previous[0] == "attempt_failed"
                and (previous[5] or {}).get("kind") == "timeout"):
            # Ended between attempts: only the call's fallback budget is checked there.
            yield Event("router.budget_expired", {"router.timeout": "fallback_budget", "router.attempt": attempt},
                        _at(trace, step))
        elif kind == "deduplicated":
            yield Event("router.deduplicated", _present({"router.leader_request_id": d.get("leader_request_id")}),
                        _at(trace, step))
        previous = step


ATTEMPT_ENDS = frozenset({"attempt_failed", "completed", "failed", "client_disconnected", "selected"})


def _attempt(trace: CallTrace, index: int, parent: SpanContext, resource: Resource, scope: InstrumentationScope,
             operation: str, address: Address) -> ReadableSpan:
    steps = trace.steps
    selected = steps[index]
    _, _, n, backend, model, detail = selected
    assert detail is not None
    ended = next((s for s in steps[index + 1:] if s[0] in ATTEMPT_ENDS
                  and (s[0] != "attempt_failed" or s[2] == n)), None)
    end_kind = ended[0] if ended is not None else None
    failure = (ended[5] or {}) if ended is not None and end_kind in ("attempt_failed", "failed") else None
    # what failed (error.type): which limit for a timeout, the status for an HTTP error (as OpenTelemetry's
    # HTTP conventions say), else the failure's kind, or the call's error code
    error = None if failure is None else failure.get("timeout") or (
        str(failure["status"]) if failure.get("status") else None) or failure.get("kind") or failure.get("code")
    where = address(backend) if backend else None
    attributes = _present({
        "gen_ai.operation.name": operation, "gen_ai.request.model": model,
        "gen_ai.response.model": model if end_kind == "completed" else None,
        "server.address": where[0] if where else None, "server.port": where[1] if where else None,
        "router.backend": backend, "router.attempt": n, "router.fallback_dial": detail.get("fallback_dial"),
        "error.type": error, "http.response.status_code": failure.get("status") if failure is not None else None})
    span_events: tuple[Event, ...] = ()
    if ended is not None and failure is not None and failure.get("kind") == "timeout":
        span_events = (Event("router.budget_expired", _present({"router.timeout": failure.get("timeout")}),
                             _at(trace, ended)),)
    end = _at(trace, ended) if ended is not None else _event_ns(trace, trace.ended or selected[1])
    ctx = SpanContext(parent.trace_id, int(detail["span_id"], 16), is_remote=False, trace_flags=SAMPLED)
    return ReadableSpan(
        f"{operation} {model}", ctx, parent, resource, attributes, span_events, kind=SpanKind.CLIENT,
        status=Status(StatusCode.ERROR, str(error)) if failure is not None else Status(StatusCode.UNSET),
        start_time=_at(trace, selected), end_time=end, instrumentation_scope=scope)


def tool_span(call: ToolCall, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    """An MCP tool call's span (kind CLIENT: the gateway calls the tool server), a child of the call whose tool
    loop made it, else of the client's ``traceparent`` span when one came in; OpenTelemetry's GenAI
    ``execute_tool`` names."""
    trace = call.trace
    assert trace is not None and call.span_id is not None
    trace_id = int(trace.trace_id, 16)
    parent = None
    if call.parent_span_id is not None:
        parent = SpanContext(trace_id, int(call.parent_span_id, 16), is_remote=False, trace_flags=SAMPLED)
    elif trace.parent_id is not None:
        parent = SpanContext(trace_id, int(trace.parent_id, 16), is_remote=True,
                             trace_flags=TraceFlags(int(trace.flags or "01", 16)))
    failed = call.outcome not in ("ok", "tool_error")
    attributes = _present({
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.tool, "router.mcp_server": call.server,
        "router.request_id": call.request_id, "router.outcome": call.outcome,
        "error.type": call.outcome if failed or call.outcome == "tool_error" else None})
    start = int(call.wall * 1e9)
    return ReadableSpan(
        f"execute_tool {call.tool}", SpanContext(trace_id, int(call.span_id, 16), is_remote=False,
                                                 trace_flags=SAMPLED),
        parent, resource, attributes, (), kind=SpanKind.CLIENT,
        status=Status(StatusCode.ERROR, call.outcome) if failed else Status(StatusCode.UNSET),
        start_time=start, end_time=start + int(call.seconds * 1e9), instrumentation_scope=scope)


def backend_address(url: str | None) -> tuple[str, int | None] | None:
    """``server.address`` / ``server.port`` of a backend's URL (None: it has no network address)."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        return (parts.hostname, parts.port) if parts.hostname else None
    except ValueError:
        return None
