"""A call refused before it reached the pipeline still gets its ledger record and a log line.

Authentication, a body too large or too slow, malformed JSON, a failed
validation, the concurrency cap, a drain, a bug of ours: each is answered
with an error that carries ``x-continuum-request-id``, and that id is the
one on the call's usage record and on its ``event=request_rejected`` log
line, so a failed call can be found by it. Only the call routes are
accounted (every door's: the App's HTTP routes, and each turn of the
Responses websocket); ``/v1/models`` and the admin API are not calls.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from switchyard.actors.errors import GatewayError
from switchyard.actors.ledger.entries import ENDPOINTS, refusal_record

log = logging.getLogger("switchyard.route")


def account_refusal(runtime: Any, scope: dict[str, Any], err: GatewayError, request_id: str,
                    arrived: float, wall: float, key: Any, trace: Any, purpose: str = "client") -> None:
    """Record ``err``'s refusal of the HTTP call in ``scope`` (nothing for routes that are not calls): ``key``
    as judged at the edge (None before), ``trace`` its context, the model and stream its body asked for;
    ``purpose``: the ledger's (``batch`` for a batch line)."""
    if scope["path"] not in ENDPOINTS or scope.get("method") != "POST":
        return
    record_refusal(runtime, scope["path"], err, request_id, key=key, model=scope.get("switchyard.model"),
                   stream=scope.get("switchyard.stream"), trace_id=trace.trace_id if trace is not None else None,
                   arrived=arrived, wall=wall, purpose=purpose)


def record_refusal(runtime: Any, route: str, err: GatewayError, request_id: str, *, key: Any, model: Any,
                   stream: Any, trace_id: str | None, arrived: float, wall: float, purpose: str = "client") -> None:
    """The refusal's ``request_rejected`` line and its ledger record, for the call route ``route``."""
    if runtime is None:
        return
    log.info("request rejected: %d %s", err.status, err.code, extra={"event": "request_rejected"})
    runtime.ledger.record(refusal_record(
        request_id, route, key=key, status=err.status, code=err.code, model=model, stream=stream,
        trace_id=trace_id, wall=wall, latency=trio.current_time() - arrived, purpose=purpose))
