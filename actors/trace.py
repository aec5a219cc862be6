"""A call's trace context, and the tracing headers each upstream attempt carries.

The context is read from the client's headers by ``protocol/http/tracing.py``;
what goes upstream is decided here, by the attempt that sends it.
"""

from __future__ import annotations

from typing import Callable

from attrs import frozen

from switchyard.actors.ids import random_hex
from switchyard.actors.routing.tally import Tally
from switchyard.config.operations import Tracing

DEFAULT_FLAGS = "01"   # sampled


# Never set from tracing config: a header name chosen for tracing must not
# replace the backend's credentials or the body's framing.
RESERVED = frozenset({"authorization", "api-key", "x-api-key", "content-type", "content-length", "host",
                      "transfer-encoding", "connection"})


@frozen
class TraceContext:
    """What one request carries for tracing; the same for every attempt of the call."""

    trace_id: str
    source: str = "generated"            # traceparent | header | generated
    x_request_id: str | None = None      # the client's own id, validated
    client_ref: str | None = None        # the client reference, validated
    client_ref_rejected: str | None = None   # why a sent client reference was dropped
    parent_id: str | None = None         # the inbound traceparent's parent span
    flags: str = DEFAULT_FLAGS
    tracestate: str | None = None


class ClientRefRejections(Tally[str]):
    """Client references dropped as invalid (the request went on), by reason (``client_ref_rejected``),
    for client_ref_rejected_total."""


def _nonzero_hex(nbytes: int, token_hex: Callable[[int], str]) -> str:
    while True:
        value = token_hex(nbytes)
        if value.strip("0"):
            return value


def new_trace_id(token_hex: Callable[[int], str] = random_hex) -> str:
    return _nonzero_hex(16, token_hex)


def new_span_id(token_hex: Callable[[int], str] = random_hex) -> str:
    return _nonzero_hex(8, token_hex)


def outbound_headers(ctx: TraceContext, tracing: Tracing, span_id: str) -> list[tuple[str, str]]:
    """The tracing headers of one upstream attempt; ``span_id`` is new for each attempt.

    The request-id, trace-id and correlation-id headers all carry the trace
    id; ``traceparent`` names this attempt as the parent span.
    """
    names = tracing.headers
    out: dict[str, str] = {
        names.request_id: ctx.trace_id,
        names.trace_id: ctx.trace_id,
        names.correlation_id: ctx.trace_id,
    }
    if tracing.w3c_trace_context:
        out["traceparent"] = f"00-{ctx.trace_id}-{span_id}-{ctx.flags}"
        if ctx.tracestate is not None:
            out["tracestate"] = ctx.tracestate
    if names.client_ref and ctx.client_ref is not None:
        out[names.client_ref] = ctx.client_ref
    return [(name, value) for name, value in out.items() if name not in RESERVED]
