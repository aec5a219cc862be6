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

When the answer's first byte goes to the client, the trace notes the
instant and the backend (``first_byte``; ``FirstByteSink`` does it), and a
listener on the TraceLog turns each finished trace into metrics: the
request path itself keeps no counters for them. With ``tracing.otlp`` a
second listener turns it into spans (``protocol/serving/otlp.py``): the
trace also keeps the inbound ``traceparent``'s parent span and flags, and
what the call spent (tokens, cost), so the spans need nothing else.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable

import trio

from switchyard.actors.timing import Timing

if TYPE_CHECKING:
    from switchyard.actors.relay import Relay, ResponseSink

log = logging.getLogger("switchyard.route")

TERMINAL = ("completed", "failed", "client_disconnected")
# One route event as the trace keeps it: (event, seconds since accepted, attempt, backend, model, detail or None).
Step = tuple[str, float, int, str | None, str | None, dict[str, Any] | None]


class CallTrace:
    """One call's route events, kept compact while the call runs.

    Each event is a tuple (``steps``: event, seconds since accepted,
    attempt, backend, model, detail or None); the fields every event shares
    (request id, revision, tracing ids) are kept once, on the trace. The
    documented 12-key dict of each event is built only when someone reads
    ``events`` or ``as_dict`` (the admin API, the log line, the ledger);
    the metrics and the spans read the steps.
    """

    __slots__ = ("request_id", "revision", "started", "steps", "attempt", "terminal", "trace_id", "x_request_id",
                 "client_ref", "route", "first_byte", "first_byte_backend", "ended", "wall", "parent_id", "flags",
                 "spent", "guardrails", "span_id", "timing")

    def __init__(self, request_id: str, revision: str, *, trace_id: str | None = None,
                 x_request_id: str | None = None, client_ref: str | None = None,
                 route: str = "/v1/chat/completions", parent_id: str | None = None, flags: str | None = None
                 ) -> None:
        self.request_id = request_id
        self.revision = revision
        self.route = route   # the client-facing route, a metric label
        # Tracing identifiers (None with tracing off): on every event and on the log line.
        self.trace_id = trace_id
        self.x_request_id = x_request_id
        self.client_ref = client_ref
        self.parent_id = parent_id   # the client's traceparent span (None: the call starts the trace)
        self.flags = flags           # ... and its flags ("01": sampled)
        # (input tokens, output tokens, cost or None) once the call is over and metered; None: not metered.
        self.spent: tuple[int, int, float | None] | None = None
        self.started = trio.current_time()
        self.wall = time.time()   # when the call arrived, for the ledger (Unix seconds)
        self.steps: list[Step] = []
        self.attempt = 0
        self.terminal: str | None = None
        # Seconds since accepted: the answer's first byte went out (from which backend), the call ended.
        # Not events, so event sequences stay as documented; the metrics read them (the admin view
        # and the log line show first_byte_ms).
        self.first_byte: float | None = None
        self.first_byte_backend: str | None = None
        self.ended: float | None = None
        self.guardrails: Any = None   # the call's guardrail Screen (its verdicts go to the ledger), if any
        # The call's own span (router.request) when something inside the call needs it as a parent while the
        # call runs (an MCP tool call of its tool loop); None: the span export picks one.
        self.span_id: str | None = None
        # A client's call: where its time went (the gateway's own, the upstreams'), for its Server-Timing and
        # switchyard_gateway_overhead_seconds; None for a call the gateway makes for itself, or a realtime session.
        self.timing: Timing | None = None

    def add(self, event: str, *, backend: str | None = None, model: str | None = None, **detail: Any) -> None:
        at = trio.current_time() - self.started
        if event in TERMINAL:
            self.terminal = event
            self.ended = at
        self.steps.append((event, at, self.attempt, backend, model, detail or None))

    def answered(self, backend: str | None, at: float | None = None) -> None:
        """The first byte of the answer went to the client now (or at ``at``), from ``backend``; later calls
        change nothing."""
        if self.first_byte is None:
            self.first_byte = (trio.current_time() if at is None else at) - self.started
            self.first_byte_backend = backend

    @property
    def eventful(self) -> bool:
        """Worth an INFO line: a backend was tried and more happened than one clean answer.

        A call refused before any dial (an unknown model, say) is the
        client's mistake and stays at DEBUG.
        """
        return self.attempt > 1 or (self.attempt == 1 and self.terminal != "completed")

    @property
    def events(self) -> list[dict[str, Any]]:
        """The route events as documented (docs/failover.md), built now from the steps."""
        shared = {"request_id": self.request_id, "trace_id": self.trace_id, "x_request_id": self.x_request_id,
                  "client_ref": self.client_ref, "route_revision": self.revision}
        out = []
        for seq, (event, at, attempt, backend, model, detail) in enumerate(self.steps, 1):
            entry: dict[str, Any] = {"seq": seq, "event": event, "t_ms": event_ms(at), **shared,
                                     "attempt": attempt, "backend": backend, "model": model}
            if event in TERMINAL:
                entry["terminal_status"] = event
            if detail:
                entry["detail"] = detail
            out.append(entry)
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "trace_id": self.trace_id, "x_request_id": self.x_request_id,
                "client_ref": self.client_ref, "route_revision": self.revision,
                "terminal_status": self.terminal, "attempts": self.attempt,
                "first_byte_ms": None if self.first_byte is None else round(self.first_byte * 1000, 3),
                "events": self.events}

    def log_fields(self) -> dict[str, Any]:
        """The structured-log fields of this call's line (see protocol/http/logs.py)."""
        backend, model = self.steps[-1][3:5] if self.steps else (None, None)
        return {"request_id": self.request_id, "trace_id": self.trace_id, "x_request_id": self.x_request_id,
                "client_ref": self.client_ref, "backend": backend, "model": model}


def event_ms(seconds: float) -> float:
    """An event's ``t_ms``: its instant (seconds since accepted) in milliseconds, to the microsecond."""
    return round(seconds * 1000, 3)


class FirstByteSink:
    """The relay's sink until the answer starts: notes the first byte on the trace, then steps aside.

    On ``start`` it gives the relay the client's own sink back, so the
    chunks that follow pay nothing for the measurement.
    """

    __slots__ = ("sink", "trace", "backend", "relay")

    def __init__(self, sink: "ResponseSink", trace: CallTrace, backend: Callable[[], str | None]) -> None:
        self.sink = sink
        self.trace = trace
        self.backend = backend          # the backend of the attempt now relaying
        self.relay: "Relay | None" = None

    @property
    def started(self) -> bool:
        return self.sink.started

    @property
    def finished(self) -> bool:
        return self.sink.finished

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        if self.relay is not None and self.relay.sink is self:
            self.relay.sink = self.sink
        backend = self.backend()
        now = trio.current_time()
        timing = self.trace.timing
        if timing is not None:
            timing.reach(now)   # the upstream's part ends here; what the sinks do next is the gateway's
        await self.sink.start(status, headers)
        self.trace.answered(backend, now)

    async def send(self, chunk: bytes) -> None:
        await self.sink.send(chunk)

    async def finish(self) -> None:
        await self.sink.finish()

    async def fail(self, error: Any) -> None:
        await self.sink.fail(error)


class TraceLog:
    """The last ``capacity`` call traces, by request id."""

    def __init__(self, capacity: int = 1000) -> None:
        self.capacity = capacity
        self._traces: OrderedDict[str, CallTrace] = OrderedDict()
        # Called with every finished trace (the Runtime's metrics); it must not raise or block.
        self.listener: Callable[[CallTrace], None] | None = None
        # ... and these after it (the span export), under the same rules.
        self.listeners: list[Callable[[CallTrace], None]] = []

    def store(self, trace: CallTrace) -> None:
        self._traces[trace.request_id] = trace
        self._traces.move_to_end(trace.request_id)
        while len(self._traces) > self.capacity:
            self._traces.popitem(last=False)
        level = logging.INFO if trace.eventful else logging.DEBUG
        if log.isEnabledFor(level):
            log.log(level, "%s", json.dumps(trace.as_dict(), separators=(",", ":")), extra=trace.log_fields())
        for listener in (self.listener, *self.listeners):
            if listener is None:
                continue
            try:
                listener(trace)
            except Exception:   # telemetry must never fail a call that is already over
                log.exception("trace listener failed on request %s", trace.request_id)

    def get(self, request_id: str) -> CallTrace | None:
        return self._traces.get(request_id)
