"""A call refused before it reached the pipeline still gets its ledger record and a log line.

Authentication, a body too large or too slow, malformed JSON, a failed
validation, the concurrency cap, a drain: each is answered with an error
that carries ``x-continuum-request-id``, and that id is the one on the
call's usage record and on its ``event=request_rejected`` log line, so a
failed call can be found by it. Only the call routes are accounted;
``/v1/models`` and the admin API are not calls.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from switchyard.actors.errors import GatewayError
from switchyard.actors.ledger.entries import ENDPOINTS, refusal_record

log = logging.getLogger("switchyard.route")


def account_refusal(runtime: Any, scope: dict[str, Any], err: GatewayError, request_id: str,
                    arrived: float, wall: float) -> None:
    """Record ``err``'s refusal of the call in ``scope`` (nothing for routes that are not calls)."""
    path = scope["path"]
    if runtime is None or path not in ENDPOINTS or scope.get("method") != "POST":
        return
    log.info("request rejected: %d %s", err.status, err.code, extra={"event": "request_rejected"})
    trace = scope.get("switchyard.trace")
    runtime.ledger.record(refusal_record(
        request_id, path, key=scope.get("switchyard.key"), status=err.status, code=err.code,
        model=scope.get("switchyard.model"), stream=scope.get("switchyard.stream"),
        trace_id=trace.trace_id if trace is not None else None, wall=wall,
        latency=trio.current_time() - arrived))

