"""Distributed tracing by header propagation: what a request says, what goes upstream.

``trace_context`` reads the inbound headers (ASGI scope headers: lowercase
byte names) once per request and returns a frozen ``TraceContext``; the
headers of each upstream attempt are ``actors/trace.py``'s. Pure apart from
the random ids, and those can be passed in.

The trace id, by precedence:

1. a valid inbound W3C ``traceparent`` (only when ``w3c_trace_context`` is on):
   version ``00``, a non-zero 32-lowercase-hex trace id, a non-zero
   16-lowercase-hex parent id, 2 lowercase hex flags;
2. a valid value of the configured trace-id header (``x-trace-id``): 32
   lowercase hex, not all zeros;
3. a fresh random 128-bit id.

The client's request id (``x-request-id``) is kept as ``x_request_id`` when
it matches ``^[A-Za-z0-9._:/-]{1,128}$`` and never replaces the trace id; an
invalid one rejects the request (``InvalidRequest``, code
``invalid_request_id``). The optional client reference header is kept when
it matches ``^[A-Za-z0-9._:-]{1,128}$`` and otherwise dropped with a reason
(``empty``, ``too_long``, ``control_char``, ``invalid_char``) the caller
counts; the request goes on. ``tracestate`` is kept only alongside a valid
inbound ``traceparent``, and only when at most 512 printable ASCII characters.

A header sent more than once is read as its values joined with ``,`` (the
HTTP rule for repeated fields), so a repeated single-valued header such as
``x-request-id`` fails its validation; a repeated ``tracestate`` is one list.
"""

from __future__ import annotations

import functools
import re
from typing import Callable, Iterable

from switchyard.actors.errors import InvalidRequest
from switchyard.actors.ids import random_hex
from switchyard.actors.trace import TraceContext, new_trace_id
from switchyard.config.operations import Tracing, TracingHeaders

TRACE_ID = re.compile(r"[0-9a-f]{32}")
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
REQUEST_ID = re.compile(r"[A-Za-z0-9._:/-]{1,128}")
CLIENT_REF = re.compile(r"[A-Za-z0-9._:-]{1,128}")
TRACESTATE_MAX = 512
CLIENT_REF_MAX = 128

# Why a client reference was dropped; the label values of client_ref_rejected_total.
CLIENT_REF_REASONS = ("empty", "too_long", "control_char", "invalid_char")

Headers = Iterable[tuple[bytes, bytes]]


def header_values(headers: Headers, wanted: frozenset[bytes]) -> dict[str, str]:
    """The ``wanted`` (lowercase) headers: name -> value (latin-1), repeated fields joined with ``,``,
    surrounding blanks trimmed."""
    out: dict[str, str] = {}
    for name, value in headers:
        name = name.lower()
        if name not in wanted:
            continue
        key = name.decode("latin-1")
        text = value.decode("latin-1").strip(" \t")
        out[key] = out[key] + "," + text if key in out else text
    return out


def parse_traceparent(value: str | None) -> tuple[str, str, str] | None:
    """(trace id, parent id, flags) of a valid version-00 traceparent, else None."""
    if value is None:
        return None
    m = TRACEPARENT.fullmatch(value)
    if m is None:
        return None
    trace_id, parent_id, flags = m.groups()
    if not trace_id.strip("0") or not parent_id.strip("0"):
        return None
    return trace_id, parent_id, flags


def valid_trace_id(value: str | None) -> bool:
    return value is not None and TRACE_ID.fullmatch(value) is not None and bool(value.strip("0"))


def valid_tracestate(value: str | None) -> bool:
    return (value is not None and 0 < len(value) <= TRACESTATE_MAX
            and all(0x20 <= ord(c) <= 0x7E for c in value))


def client_ref_problem(value: str) -> str | None:
    """Why ``value`` is no acceptable client reference (checked in this order), or None."""
    if value == "":
        return "empty"
    if len(value) > CLIENT_REF_MAX:
        return "too_long"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "control_char"
    if CLIENT_REF.fullmatch(value) is None:
        return "invalid_char"
    return None


@functools.lru_cache(maxsize=16)
def _wanted(names: TracingHeaders, w3c: bool) -> frozenset[bytes]:
    """The header names a request's trace context is read from (per configuration, not per request)."""
    wanted = {names.request_id, names.trace_id}
    if names.client_ref:
        wanted.add(names.client_ref)
    if w3c:
        wanted |= {"traceparent", "tracestate"}
    return frozenset(n.encode("latin-1") for n in wanted)


def trace_context(headers: Headers, tracing: Tracing,
                  token_hex: Callable[[int], str] = random_hex) -> TraceContext | None:
    """The request's TraceContext; None when tracing is off.

    Raises ``InvalidRequest`` (400, code ``invalid_request_id``) for an
    invalid request-id header.
    """
    if not tracing.enabled:
        return None
    names = tracing.headers
    values = header_values(headers, _wanted(names, tracing.w3c_trace_context))

    x_request_id = values.get(names.request_id)
    if x_request_id is not None and REQUEST_ID.fullmatch(x_request_id) is None:
        raise InvalidRequest(
            f"Header '{names.request_id}' must be 1 to 128 characters of A-Z, a-z, 0-9 and . _ : / -",
            param=names.request_id, code="invalid_request_id")

    client_ref = rejected = None
    if names.client_ref:
        sent = values.get(names.client_ref)
        if sent is not None:
            rejected = client_ref_problem(sent)
            client_ref = sent if rejected is None else None

    parsed = parse_traceparent(values.get("traceparent")) if tracing.w3c_trace_context else None
    if parsed is not None:
        trace_id, parent_id, flags = parsed
        state = values.get("tracestate")
        return TraceContext(trace_id=trace_id, source="traceparent", x_request_id=x_request_id,
                            client_ref=client_ref, client_ref_rejected=rejected, parent_id=parent_id,
                            flags=flags, tracestate=state if valid_tracestate(state) else None)
    header = values.get(names.trace_id)
    if valid_trace_id(header):
        assert header is not None
        return TraceContext(trace_id=header, source="header", x_request_id=x_request_id,
                            client_ref=client_ref, client_ref_rejected=rejected)
    return TraceContext(trace_id=new_trace_id(token_hex), x_request_id=x_request_id, client_ref=client_ref,
                        client_ref_rejected=rejected)


def response_request_id(ctx: TraceContext, router_id: str) -> str:
    """The response's ``x-request-id``: the client's own valid id, else the router's."""
    return ctx.x_request_id if ctx.x_request_id is not None else router_id
