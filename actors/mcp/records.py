"""What a finished tool call leaves behind: its ledger record and the ``ToolCall`` the metrics and spans read.

The ledger record is one of ``purpose: mcp``: the key and its organization,
the server as its ``backend``, the tool's public name (``<server>__<tool>``)
as its ``model``, the outcome as its status and error code, the latency.
Never the arguments or the result, nor a token count or a cost (a tool call
has none). ``status`` is what the outcome would be over HTTP, so the
ledger's failure counts read the same as a model call's.
"""

from __future__ import annotations

from typing import Mapping

from attrs import frozen

from switchyard.actors.ledger.record import MCP, LedgerRecord
from switchyard.actors.mcp.port import INVALID, UNAVAILABLE, UPSTREAM_ERROR
from switchyard.actors.trace import TraceContext
from switchyard.config.access import ApiKey

PURPOSE = "mcp"
ENDPOINT = MCP
OK, TOOL_ERROR, TIMEOUT, TOO_LARGE = "ok", "tool_error", "timeout", "result_too_large"
RATE_LIMITED, UNKNOWN_TOOL = "rate_limited", "unknown_tool"
CLIENT_LEFT = "client_disconnected"   # cut from outside: the client left (as a model call's record says it)
# an outcome -> the ledger's status (the tool's own error is an answer: 200, with its code)
STATUS = {OK: 200, TOOL_ERROR: 200, UNKNOWN_TOOL: 404, RATE_LIMITED: 429, TIMEOUT: 504, TOO_LARGE: 502,
          UNAVAILABLE: 503, INVALID: 502, UPSTREAM_ERROR: 502, CLIENT_LEFT: 499}
OUTCOMES = tuple(STATUS)


@frozen
class Caller:
    """Who asks, settled by the door: the request, its key (None: an open data plane), its trace."""

    request_id: str
    key: ApiKey | None
    client_ip: str | None = None
    trace: TraceContext | None = None
    headers: Mapping[str, str] = {}   # the request's headers, names lower-cased: what forward_headers picks
    parent_span_id: str | None = None   # the span its tool calls' spans are children of: their chat call's


@frozen
class ToolCall:
    """One finished tool call, for the metrics and the span export."""

    request_id: str
    server: str
    tool: str                  # its name on the server
    outcome: str               # one of OUTCOMES
    wall: float                # when it began, Unix seconds
    seconds: float             # how long it took
    key_id: str | None
    trace: TraceContext | None   # the request's (None with tracing off: no span)
    span_id: str | None
    parent_span_id: str | None = None   # the call whose tool loop made it (None: the client's span, if any)


def ledger_record(caller: Caller, server: str | None, name: str, outcome: str, wall: float,
                  seconds: float) -> LedgerRecord:
    key = caller.key
    return LedgerRecord(
        request_id=caller.request_id, time=wall, key_id=key.id if key is not None else None,
        organization_id=key.organization_id if key is not None else None, endpoint=ENDPOINT, model=name,
        served_model=None, backend=server, attempts=0 if outcome in (UNKNOWN_TOOL, RATE_LIMITED) else 1,
        status=STATUS[outcome], error_code=None if outcome == OK else outcome, latency_ms=round(seconds * 1000, 3),
        purpose=PURPOSE, trace_id=caller.trace.trace_id if caller.trace is not None else None)
