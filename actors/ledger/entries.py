"""A call's ledger record, made from what the call did: its trace, its meter, its identity.

One record per call, whatever its end: answered (``completed``), failed
(the failed event's status, or 200 when the stream had already begun),
left by its client (499, as HTTP servers log it), refused before any
routing (``refused``: authentication, validation, a body too large or too
slow), or served a shared answer (a dedup follower, which consumed nothing).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from switchyard.actors.ledger.counts import TokenCounts
from switchyard.actors.ledger.pricing import cost_of
from switchyard.actors.ledger.record import MESSAGES, LedgerRecord
from switchyard.config.endpoints import Endpoint

CLIENT_LEFT = 499
# The client-facing route of a call, as the record's endpoint: the text of its Endpoint (the Messages door's
# calls are chat calls, recorded as "messages"; /rerank, vLLM's and Jina's path, is a rerank); another route
# is recorded as itself.
ENDPOINTS: dict[str, str] = {
    "/v1/chat/completions": Endpoint.CHAT.value, "/v1/completions": Endpoint.COMPLETIONS.value,
    "/v1/embeddings": Endpoint.EMBEDDINGS.value, "/v1/responses": Endpoint.RESPONSES.value,
    "/v1/responses/compact": Endpoint.COMPACT.value, "/anthropic/v1/messages": MESSAGES,
    "/v1/images/generations": Endpoint.IMAGES_GENERATIONS.value, "/v1/images/edits": Endpoint.IMAGES_EDITS.value,
    "/v1/images/variations": Endpoint.IMAGES_VARIATIONS.value,
    "/v1/rerank": Endpoint.RERANK.value, "/rerank": Endpoint.RERANK.value,
    "/v1/moderations": Endpoint.MODERATIONS.value,
    "/v1/audio/transcriptions": Endpoint.AUDIO_TRANSCRIPTIONS.value,
    "/v1/audio/translations": Endpoint.AUDIO_TRANSLATIONS.value, "/v1/audio/speech": Endpoint.AUDIO_SPEECH.value}


def endpoint_of(route: str) -> str:
    return ENDPOINTS.get(route, route)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def outcome(trace: Any) -> tuple[int, str | None]:
    """(the HTTP status the client got, the error code) from a finished trace's terminal event."""
    if trace.terminal == "completed" or trace.terminal is None and not trace.events:
        return 200, None
    for event in reversed(trace.events):
        if event["event"] == "failed":
            detail = event.get("detail") or {}
            status = 200 if detail.get("committed") else int(detail.get("status") or 500)
            return status, detail.get("code")
        if event["event"] == "completed":
            return 200, None
        if event["event"] == "client_disconnected":
            break
    return CLIENT_LEFT, "client_disconnected"


def route_events_of(trace: Any) -> str | None:
    """The trace as the ledger keeps it: None for one attempt that completed (the record says it all),
    else its route events as compact JSON."""
    if trace.attempt == 1 and trace.terminal == "completed":
        return None
    return json.dumps(trace.as_dict(), separators=(",", ":"))


def call_record(trace: Any, *, key: Any, model: str | None, stream: bool, counts: TokenCounts,
                cost: Decimal | None, estimated: bool, served: tuple[str | None, str | None],
                purpose: str = "client") -> LedgerRecord:
    """The record of a call that reached the pipeline (``trace``: its finished CallTrace)."""
    status, code = outcome(trace)
    backend, served_model = served
    return LedgerRecord(
        request_id=trace.request_id, time=trace.wall, key_id=key.id if key is not None else None,
        organization_id=key.organization_id if key is not None else None, endpoint=endpoint_of(trace.route),
        model=model, served_model=served_model if trace.attempt else None,
        backend=backend if trace.attempt else None, attempts=trace.attempt, status=status, error_code=code,
        input_tokens=counts.input, output_tokens=counts.output, cached_tokens=counts.cached,
        cache_write_tokens=counts.cache_write, reasoning_tokens=counts.reasoning,
        cost=None if cost is None else float(cost), estimated=estimated,
        latency_ms=_ms(trace.ended if trace.ended is not None else 0.0) or 0.0, ttfb_ms=_ms(trace.first_byte),
        stream=stream, purpose=purpose, trace_id=trace.trace_id, route_events=route_events_of(trace),
        guardrails=trace.guardrails.ledger_field() if getattr(trace, "guardrails", None) is not None else None)


def refusal_record(request_id: str, route: str, *, key: Any, status: int, code: str | None, model: Any,
                   stream: Any, trace_id: str | None, wall: float, latency: float,
                   purpose: str = "client") -> LedgerRecord:
    """The record of a call refused before it reached the pipeline (nothing was sent upstream)."""
    return LedgerRecord(
        request_id=request_id, time=wall, key_id=key.id if key is not None else None,
        organization_id=key.organization_id if key is not None else None, endpoint=endpoint_of(route),
        model=model if isinstance(model, str) else None, served_model=None, backend=None, attempts=0,
        status=status, error_code=code, latency_ms=round(latency * 1000, 3), stream=stream is True,
        trace_id=trace_id, purpose=purpose)



def search_record(trace: Any, *, key: Any, model: str | None, provider: str | None, tried: int, failed: bool,
                  cost: float | None, seconds: float) -> LedgerRecord:
    """One web search a call's ``:online`` loop ran (``purpose: web_search``): the provider that answered (or
    the last one tried) as its backend, ``tried`` providers as its attempts, its ``cost_per_search`` (none
    when no provider answered)."""
    return LedgerRecord(
        request_id=trace.request_id, time=trace.wall, key_id=key.id if key is not None else None,
        organization_id=key.organization_id if key is not None else None, endpoint=endpoint_of(trace.route),
        model=model, served_model=None, backend=provider, attempts=tried, status=502 if failed else 200,
        error_code="web_search_failed" if failed else None, cost=None if failed else cost,
        latency_ms=round(seconds * 1000, 3), purpose="web_search", trace_id=trace.trace_id)


def classifier_record(rec: Any, snapshot: Any, wall: float) -> LedgerRecord:
    """A classifier try (``actors.usage.UsageRecord``, purpose ``classifier``) as its ledger record,
    priced like any call on its model's metadata."""
    counts = TokenCounts(input=rec.input_tokens, output=rec.output_tokens)
    meta = snapshot.metadata_for(rec.model, rec.backend)
    cost = cost_of(meta.pricing if meta is not None else None, counts)
    status = rec.status if rec.status is not None else (504 if rec.outcome == "timeout" else 502)
    if rec.outcome != "ok" and status < 400:
        status = 502   # answered, but not usably
    return LedgerRecord(
        request_id=rec.request_id, time=wall, key_id=rec.key_id, organization_id=None, endpoint=Endpoint.CHAT.value,
        model=rec.model, served_model=rec.model, backend=rec.backend, attempts=1, status=status,
        error_code=None if rec.outcome == "ok" else f"classifier_{rec.outcome}",
        input_tokens=rec.input_tokens, output_tokens=rec.output_tokens,
        cost=None if cost is None else float(cost), latency_ms=round(rec.latency_seconds * 1000, 3),
        purpose=rec.purpose)
