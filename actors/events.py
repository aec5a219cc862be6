"""Route events: what happened to one call, attempt by attempt.

Every call records its sequence -- accepted, each backend selected, each
failure with its kind, retries, route changes, and one terminal event --
and every event carries the request id, the config revision, the backend and
model, and the attempt number, so a consumer can deduplicate by (request,
attempt) instead of by text. With tracing on, every event also carries the
trace id and the client's x-request-id and client reference (null when off
or not sent), and each ``selected`` event the span id sent upstream in that
attempt's ``traceparent``. The finished trace is logged as one JSON line
and kept in a bounded in-memory log for ``GET /admin/requests/{id}/events``.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from typing import Any

import trio

log = logging.getLogger("switchyard.route")

TERMINAL = ("completed", "failed", "client_disconnected")


class CallTrace:
    __slots__ = ("request_id", "revision", "started", "events", "attempt", "terminal", "trace_id", "x_request_id",
                 "client_ref")

    def __init__(self, request_id: str, revision: str, *, trace_id: str | None = None,
                 x_request_id: str | None = None, client_ref: str | None = None) -> None:
        self.request_id = request_id
        self.revision = revision
        # Tracing identifiers (None with tracing off): on every event and on the log line.
        self.trace_id = trace_id
        self.x_request_id = x_request_id
        self.client_ref = client_ref
        self.started = trio.current_time()
        self.events: list[dict[str, Any]] = []
        self.attempt = 0
        self.terminal: str | None = None

    def add(self, event: str, *, backend: str | None = None, model: str | None = None, **detail: Any) -> None:
        entry: dict[str, Any] = {
            "seq": len(self.events) + 1,
            "event": event,
            "t_ms": round((trio.current_time() - self.started) * 1000, 3),
            "request_id": self.request_id,
            "trace_id": self.trace_id,
            "x_request_id": self.x_request_id,
            "client_ref": self.client_ref,
            "route_revision": self.revision,
            "attempt": self.attempt,
            "backend": backend,
            "model": model,
        }
        if event in TERMINAL:
            self.terminal = event
            entry["terminal_status"] = event
        if detail:
            entry["detail"] = detail
        self.events.append(entry)

    @property
    def eventful(self) -> bool:
        """Worth an INFO line: a backend was tried and more happened than one clean answer.

        A call refused before any dial (an unknown model, say) is the
        client's mistake and stays at DEBUG.
        """
        return self.attempt > 1 or (self.attempt == 1 and self.terminal != "completed")

    def as_dict(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "trace_id": self.trace_id, "x_request_id": self.x_request_id,
                "client_ref": self.client_ref, "route_revision": self.revision,
                "terminal_status": self.terminal, "attempts": self.attempt, "events": self.events}

    def log_fields(self) -> dict[str, Any]:
        """The structured-log fields of this call's line (see protocol/logs.py)."""
        last = self.events[-1] if self.events else {}
        return {"request_id": self.request_id, "trace_id": self.trace_id, "x_request_id": self.x_request_id,
                "client_ref": self.client_ref, "backend": last.get("backend"), "model": last.get("model")}


class TraceLog:
    """The last ``capacity`` call traces, by request id."""

    def __init__(self, capacity: int = 1000) -> None:
        self.capacity = capacity
        self._traces: OrderedDict[str, CallTrace] = OrderedDict()

    def store(self, trace: CallTrace) -> None:
        self._traces[trace.request_id] = trace
        self._traces.move_to_end(trace.request_id)
        while len(self._traces) > self.capacity:
            self._traces.popitem(last=False)
        level = logging.INFO if trace.eventful else logging.DEBUG
        if log.isEnabledFor(level):
            log.log(level, "%s", json.dumps(trace.as_dict(), separators=(",", ":")), extra=trace.log_fields())

    def get(self, request_id: str) -> CallTrace | None:
        return self._traces.get(request_id)
