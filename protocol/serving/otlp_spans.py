"""What one finished call becomes in OpenTelemetry: a ``router.request`` span and one span per attempt.

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

from switchyard.actors.events import CallTrace
from switchyard.actors.ledger.entries import endpoint_of, outcome

ROOT = "router.request"
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
# gen_ai.operation.name by the call's endpoint (the ledger's names).
OPERATIONS = {"chat": "chat", "messages": "chat", "responses": "chat", "completions": "text_completion",
              "embeddings": "embeddings", "/v1/realtime": "realtime"}
Address = Callable[[str], "tuple[str, int | None] | None"]   # backend name -> (host, port), if known


def _ns(trace: CallTrace, seconds: float) -> int:
    """A call-relative instant (seconds since accepted) as Unix nanoseconds."""
    return int((trace.wall + seconds) * 1e9)


def _at(trace: CallTrace, event: dict[str, Any]) -> int:
    return _ns(trace, event["t_ms"] / 1000)


def _attrs(**pairs: Any) -> dict[str, Any]:
    """Attributes without the absent ones (OpenTelemetry has no null)."""
    return {k.replace("__", "."): v for k, v in pairs.items() if v is not None}


def call_spans(trace: CallTrace, root_id: int, resource: Resource, scope: InstrumentationScope,
               address: Address) -> list[ReadableSpan]:
    """The call's spans, attempts first and the root last; ``trace.trace_id`` must be set."""
    assert trace.trace_id is not None
    trace_id = int(trace.trace_id, 16)
    root = SpanContext(trace_id, root_id, is_remote=False, trace_flags=SAMPLED)
    parent = None
    if trace.parent_id is not None:
        parent = SpanContext(trace_id, int(trace.parent_id, 16), is_remote=True,
                             trace_flags=TraceFlags(int(trace.flags or "01", 16)))
    operation = OPERATIONS.get(endpoint_of(trace.route), "chat")
    events = trace.events
    spans = [_attempt(trace, i, root, resource, scope, operation, address) for i, e in enumerate(events)
             if e["event"] == "selected" and (e.get("detail") or {}).get("span_id")]
    spans.append(_root(trace, root, parent, resource, scope, operation))
    return spans


def _root(trace: CallTrace, ctx: SpanContext, parent: SpanContext | None, resource: Resource,
          scope: InstrumentationScope, operation: str) -> ReadableSpan:
    events = trace.events
    status, code = outcome(trace)
    first = events[0] if events else {}
    answered = next((e for e in reversed(events) if e["event"] == "selected"), None)
    spent = trace.spent or (None, None, None)
    end = trace.ended if trace.ended is not None else (events[-1]["t_ms"] / 1000 if events else 0.0)
    attributes = _attrs(
        router__request_id=trace.request_id, router__client_ref=trace.client_ref,
        router__x_request_id=trace.x_request_id, router__route_revision=trace.revision,
        router__attempts=trace.attempt, router__terminal_status=trace.terminal, router__cost=spent[2],
        http__route=trace.route, http__response__status_code=status, error__type=code,
        gen_ai__operation__name=operation,
        gen_ai__request__model=first.get("model") if first.get("event") == "accepted" else None,
        gen_ai__response__model=answered["model"] if answered is not None and trace.terminal == "completed" else None,
        gen_ai__usage__input_tokens=spent[0] if spent[0] else None,
        gen_ai__usage__output_tokens=spent[1] if spent[1] else None,
        router__stream=first.get("detail", {}).get("stream") if first.get("event") == "accepted" else None)
    failed = trace.terminal == "failed" and status >= 400
    return ReadableSpan(
        ROOT, ctx, parent, resource, attributes, tuple(_root_events(trace)), kind=SpanKind.SERVER,
        status=Status(StatusCode.ERROR, code) if failed else Status(StatusCode.UNSET),
        start_time=_ns(trace, 0.0), end_time=_ns(trace, end), instrumentation_scope=scope)


def _root_events(trace: CallTrace) -> Iterable[Event]:
    previous: dict[str, Any] = {}
    for e in trace.events:
        kind, d = e["event"], e.get("detail") or {}
        at = _at(trace, e)
        if kind == "retry_scheduled":
            yield Event("router.retry", _attrs(router__backend=e["backend"], gen_ai__request__model=e["model"],
                                               router__attempt=e["attempt"], router__delay_ms=d.get("delay_ms")), at)
        elif kind == "route_changed":
            name = "router.mid_stream_recovery" if d.get("mid_stream") else "router.fallback"
            yield Event(name, _attrs(router__from_backend=d.get("from_backend"), router__from_model=d.get("from_model"),
                                     router__to_backend=e["backend"], router__to_model=e["model"],
                                     router__reason=d.get("reason"), router__mode=d.get("mode")), at)
        elif kind == "attempt_failed" and d.get("kind") == "timeout":
            yield Event("router.budget_expired", _attrs(router__timeout=d.get("timeout"), router__backend=e["backend"],
                                                        router__attempt=e["attempt"]), at)
        elif kind == "failed" and d.get("code") == "timeout" and not (
                previous.get("event") == "attempt_failed" and (previous.get("detail") or {}).get("kind") == "timeout"):
            # Ended between attempts: only the call's fallback budget is checked there.
            yield Event("router.budget_expired", _attrs(router__timeout="fallback_budget",
                                                        router__attempt=e["attempt"]), at)
        elif kind == "deduplicated":
            yield Event("router.deduplicated", _attrs(router__leader_request_id=d.get("leader_request_id")), at)
        previous = e


def _attempt(trace: CallTrace, index: int, parent: SpanContext, resource: Resource, scope: InstrumentationScope,
             operation: str, address: Address) -> ReadableSpan:
    events = trace.events
    selected = events[index]
    n, backend, model = selected["attempt"], selected["backend"], selected["model"]
    detail = selected.get("detail") or {}
    ended = next((e for e in events[index + 1:] if e["event"] in ("attempt_failed", "completed", "failed",
                                                                   "client_disconnected", "selected")
                  and (e["event"] != "attempt_failed" or e["attempt"] == n)), None)
    end_kind = ended["event"] if ended is not None else None
    failure = (ended.get("detail") or {}) if ended is not None and end_kind in ("attempt_failed", "failed") else None
    # what failed (error.type): which limit for a timeout, the status for an HTTP error (as OpenTelemetry's
    # HTTP conventions say), else the failure's kind, or the call's error code
    error = None if failure is None else failure.get("timeout") or (
        str(failure["status"]) if failure.get("status") else None) or failure.get("kind") or failure.get("code")
    where = address(backend) if backend else None
    attributes = _attrs(
        gen_ai__operation__name=operation, gen_ai__request__model=model,
        gen_ai__response__model=model if end_kind == "completed" else None,
        server__address=where[0] if where else None, server__port=where[1] if where else None,
        router__backend=backend, router__attempt=n, router__fallback_dial=detail.get("fallback_dial"),
        error__type=error, http__response__status_code=failure.get("status") if failure is not None else None)
    span_events: tuple[Event, ...] = ()
    if ended is not None and failure is not None and failure.get("kind") == "timeout":
        span_events = (Event("router.budget_expired", _attrs(router__timeout=failure.get("timeout")), _at(trace, ended)),)
    end = _at(trace, ended) if ended is not None else _ns(trace, trace.ended or selected["t_ms"] / 1000)
    ctx = SpanContext(parent.trace_id, int(detail["span_id"], 16), is_remote=False, trace_flags=SAMPLED)
    return ReadableSpan(
        f"{operation} {model}", ctx, parent, resource, attributes, span_events, kind=SpanKind.CLIENT,
        status=Status(StatusCode.ERROR, str(error)) if failure is not None else Status(StatusCode.UNSET),
        start_time=_at(trace, selected), end_time=end, instrumentation_scope=scope)


def backend_address(url: str | None) -> tuple[str, int | None] | None:
    """``server.address`` / ``server.port`` of a backend's URL (None: it has no network address)."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        return (parts.hostname, parts.port) if parts.hostname else None
    except ValueError:
        return None
