"""Per-call and per-HTTP-request metrics, derived after the fact.

Each Runtime owns one ``GatewayMetrics``: a CollectorRegistry of its own
(a test process runs many Runtimes; the global default registry is never
used), prometheus-client Counters, Histograms and a Gauge, and the
``RuntimeCollector`` that reads the counters living on the pool and the
actors at scrape time.

Per-call numbers come from the finished ``CallTrace``: the TraceLog calls
``observe`` once per call, after the answer is out, so the request path
does no metric work while it runs. HTTP counts are two calls around
``App.http``. Nothing here awaits: a scrape or a recording never makes a
request wait.

Label values are bounded: routes are the fixed route table (``/admin/*``
and ``other`` group the rest), methods a fixed set, statuses what the
gateway sends, backends the configured names. Model names come from
clients, so only a name the gateway routed or lists becomes a label, at
most ``MODEL_LABEL_LIMIT`` of them per process; anything else is
``other``. docs/metrics.md lists every metric.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from switchyard.actors import safe_text
from switchyard.actors.events import CallTrace
from switchyard.actors.ledger.record import LedgerRecord
from switchyard.actors.mcp.records import ToolCall
from switchyard.actors.routing.listing import list_models
from switchyard.actors.routing.variants import VARIANTS
from switchyard.protocol.serving.label_children import LabelChildren
from switchyard.protocol.serving.metrics import RuntimeCollector
from switchyard.protocol.serving.store_metrics import (
    CONTROL,
    LEDGER,
    LIMITER,
    OTLP,
    STORED,
    CountersCollector,
    counters_of,
)
from switchyard.protocol.serving.tool_metrics import ToolMetrics
from switchyard.protocol.serving.usage_metrics import UsageMetrics

if TYPE_CHECKING:
    from switchyard.actors.runtime import Runtime

log = logging.getLogger("switchyard.metrics")

OTHER = "other"            # a label value outside the bounded set
NONE = "none"              # no backend: the call never dialed one
DISCONNECTED = "client_disconnected"
MODEL_LABEL_LIMIT = 100    # distinct model label values per process; later names count as "other"
MODEL_NAME_MAX = 200       # characters; a longer name is never a label
MODEL_ROUTE = "/v1/models/"   # GET /v1/models/{model} (as App routes it)
ANTHROPIC_MODEL_ROUTE = "/anthropic/v1/models/"   # GET /anthropic/v1/models/{model}
STORED_RESPONSE_ROUTE = "/v1/responses/"   # /v1/responses/{id}[/cancel|/input_items] (stored responses)
# a file's and a batch's routes, by template: one label however many ids (protocol/doors/files.py, batches.py)
ITEM_ROUTES = ((re.compile(r"/v1/files/[^/]+"), "/v1/files/{file_id}"),
               (re.compile(r"/v1/files/[^/]+/content"), "/v1/files/{file_id}/content"),
               (re.compile(r"/v1/batches/[^/]+"), "/v1/batches/{batch_id}"),
               (re.compile(r"/v1/batches/[^/]+/cancel"), "/v1/batches/{batch_id}/cancel"))
METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
# attempt_failed detail.timeout values: the gateway's limits, and httpx's own (connect, read, write, pool).
TIMEOUT_KINDS = frozenset({"first_byte", "chunk_interval", "total", "fallback_budget",
                           "connect", "read", "write", "pool", "request"})
SAME_MODEL, CHAIN = "same_model_sibling", "fallback_chain"   # streaming_fallback_total reasons

# LLM calls run from milliseconds (a refusal) to minutes (a long stream).
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
TTFT_BUCKETS = (0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0)


# Admission is a dictionary lookup in memory or one Redis round trip: microseconds to tens of ms.
ADMISSION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25)
# The gateway's own time in a call: a fraction of a millisecond, up to a second with features that call out.
OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class GatewayMetrics:
    """One Runtime's registry and the metrics fed from its finished calls and HTTP requests."""

    def __init__(self, runtime: "Runtime") -> None:
        self.runtime = runtime
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(RuntimeCollector(runtime))
        r = self.registry
        self.requests = Counter(
            "switchyard_requests", "Chat calls by route, requested model, the backend of the last attempt, and "
            "the HTTP status the client got (or client_disconnected)", ["route", "model", "backend", "status"],
            registry=r)
        self.duration = Histogram(
            "switchyard_request_duration_seconds", "Chat call duration, accepted to the end of the call",
            ["route", "model"], buckets=DURATION_BUCKETS, registry=r)
        self.ttft = Histogram(
            "switchyard_time_to_first_token_seconds", "Accepted to the first byte of the answer sent to the "
            "client (a stream's first data event; a buffered answer's whole body)", ["route", "model", "backend"],
            buckets=TTFT_BUCKETS, registry=r)
        self.overhead = Histogram(
            "switchyard_gateway_overhead_seconds", "The gateway's own time in a call: from the request being in "
            "to the call's end, less its waits on upstreams (its Server-Timing gateway metric)", ["route"],
            buckets=OVERHEAD_BUCKETS, registry=r)
        self.stream_errors = Counter(
            "switchyard_stream_errors", "Answers that had started (HTTP 200 sent) and ended with an in-band "
            "error event and no [DONE]", ["route", "model", "backend"], registry=r)
        self.retries = Counter(
            "switchyard_retries", "Retries scheduled on the same route, by backend and model", ["backend", "model"],
            registry=r)
        self.fallbacks = Counter(
            "switchyard_fallbacks", "Route changes (sibling backend or chain model, before or after the stream "
            "started) by failure kind and models", ["reason", "from_model", "to_model"], registry=r)
        self.streaming_fallbacks = Counter(
            "streaming_fallback", "Mid-stream hops (after the stream reached the client), by reason",
            ["reason"], registry=r)
        for reason in (SAME_MODEL, CHAIN):   # both series from the start, so rate() works at once
            self.streaming_fallbacks.labels(reason)
        self.quality_failures = Counter(
            "continuum_quality_check_failures", "Answers that failed fallback.quality_check (each a failed "
            "attempt), by the model that answered and the check", ["model", "check"], registry=r)
        self.timeouts = Counter(
            "switchyard_timeouts", "Attempts that failed on a timeout, by backend and which limit fired",
            ["backend", "kind"], registry=r)
        self.http_requests = Counter(
            "switchyard_http_requests", "HTTP requests answered, by route, method and status",
            ["route", "method", "status"], registry=r)
        self.in_flight = 0   # read at scrape time: a request pays an integer increment, not a gauge update
        self.http_in_flight = Gauge(
            "switchyard_http_requests_in_flight", "HTTP requests being served now (streams included)", registry=r)
        self.http_in_flight.set_function(lambda: self.in_flight)
        # Rate limits and budgets: refusals by scope and reason (the dimension), and the admission's time.
        self.limit_refusals = Counter(
            "rate_limit_refusals", "Calls refused by rate_limiting or a budget, by scope (global, client_ip, "
            "key, organization, model) and reason (the limit's dimension)", ["scope", "reason"], registry=r)
        self.admission = Histogram(
            "rate_limit_admission_seconds", "Time to reserve a call's limits and budgets (one round trip to "
            "Redis with state.redis_url)", buckets=ADMISSION_BUCKETS, registry=r)
        # The usage ledger: its client records (observe_record) and its health.
        self.usage = UsageMetrics(r, lambda: runtime.snapshot.usage.metrics_max_label_values)
        self.usage.read_ledger(lambda: counters_of(runtime.ledger, LEDGER))
        # the shared limiter's health (with state.redis_url; the local limiter has none of these counters)
        r.register(CountersCollector(LIMITER, lambda: counters_of(runtime.limiter, LIMITER)))
        # the span export's queue and its collector (with tracing.otlp)
        r.register(CountersCollector(OTLP, lambda: counters_of(runtime.spans, OTLP)))
        r.register(CountersCollector(STORED, lambda: counters_of(
            runtime.response_owners.writes, STORED)))
        r.register(CountersCollector(CONTROL, lambda: counters_of(
            runtime.control if runtime.control.store is not None else None, CONTROL)))
        self.tools = ToolMetrics(r)   # MCP tool calls (/mcp), by server, tool and outcome
        self._child = LabelChildren()   # metric.labels(...), looked up once per label values
        self._models: set[str] = set()
        self.clean_labels = False   # a label value UTF-8 cannot encode was met: every scrape cleans (metrics.py)
        self._listed: tuple[Any, Any, frozenset[str]] | None = None   # (snapshot, discovery view, ids)
        self._full_logged = False

    # --- HTTP requests (App.http) ----------------------------------------------------

    def http_began(self) -> None:
        self.in_flight += 1

    def http_ended(self, path: str, method: str, status: int | None, routes: Mapping[str, Any]) -> None:
        """One HTTP request over; ``status`` None: no response went out (the client left first)."""
        self.in_flight -= 1
        self._child(self.http_requests, http_route(path, routes), method if method in METHODS else OTHER,
                    DISCONNECTED if status is None else str(status)).inc()

    # --- rate limits (the call pipeline) -------------------------------------------------

    def observe_admission(self, seconds: float, refusal: Any) -> None:
        """One admission: how long it took, and what refused it (None: admitted)."""
        self.admission.observe(seconds)
        if refusal is not None:
            self._child(self.limit_refusals, refusal.scope, refusal.dimension).inc()

    # --- MCP tool calls (ToolCalls' listener) --------------------------------------------

    def observe_tool(self, call: ToolCall) -> None:
        self.tools.observe(call)

    # --- ledger records (the LedgerActor's listener) ------------------------------------

    def observe_record(self, rec: LedgerRecord) -> None:
        """A client call's tokens and cost, by key and model (bounded labels)."""
        self.usage.observe(rec)

    # --- finished calls (TraceLog listener) ------------------------------------------

    def observe(self, trace: CallTrace) -> None:
        """Count one finished call from its trace (its compact steps: no event dicts are built)."""
        steps = trace.steps
        if not steps:
            return
        route = trace.route
        first_event, _, _, _, first_model, _ = steps[0]
        _, _, _, last_backend, _, last_detail = steps[-1]
        routed = any(step[0] == "selected" for step in steps)
        model = self.model_label(first_model if first_event == "accepted" else None, routed)
        backend = last_backend or NONE
        detail = last_detail or {}
        committed_failure = trace.terminal == "failed" and bool(detail.get("committed"))
        if trace.terminal == "completed" or committed_failure:
            status = "200"
        elif trace.terminal == "failed":
            status = str(detail.get("status"))
        else:
            status = DISCONNECTED
        self._child(self.requests, route, model, backend, status).inc()
        if committed_failure:
            self._child(self.stream_errors, route, model, backend).inc()
        if trace.ended is not None:
            self._child(self.duration, route, model).observe(trace.ended)
            if trace.timing is not None:   # a client's call (not one the gateway made for itself)
                self._child(self.overhead, route).observe(trace.timing.gateway(trace.started + trace.ended))
        if trace.first_byte is not None:
            self._child(self.ttft, route, model, trace.first_byte_backend or NONE).observe(trace.first_byte)
        for kind, _, _, step_backend, step_model, d in steps:
            if kind == "attempt_failed":
                assert d is not None
                if d.get("kind") == "timeout":
                    limit = d.get("timeout")
                    self.timeouts.labels(step_backend or NONE, limit if limit in TIMEOUT_KINDS else OTHER).inc()
                elif (failed := d.get("quality_check_failed")) is not None:
                    self.quality_failures.labels(self.model_label(step_model, True), failed["check"]).inc()
            elif kind == "retry_scheduled":
                self.retries.labels(step_backend or NONE, self.model_label(step_model, True)).inc()
            elif kind == "route_changed":
                assert d is not None
                before, after = d["from_model"], step_model
                self.fallbacks.labels(d["reason"], self.model_label(before, True),
                                      self.model_label(after, True)).inc()
                if d.get("mid_stream"):
                    self.streaming_fallbacks.labels(SAME_MODEL if before == after else CHAIN).inc()

    def model_label(self, name: str | None, routed: bool) -> str:
        """``name`` as a label value if the gateway lists it, or routed it (a backend was dialed for it).

        Listed names (and their variants) are bounded by the configuration and
        always labels. A routed name that is not listed (a backend serving
        every name lets clients route any) becomes a label once and stays one,
        up to ``MODEL_LABEL_LIMIT`` of them; later ones count as ``other``.
        """
        if name is None:
            return NONE
        if name in self._models:
            return name
        if len(name) > MODEL_NAME_MAX or not safe_text.is_clean(name):
            return OTHER         # the exposition could not encode it
        if self._listed_name(name):
            return name          # the configuration bounds these: never crowded out by routed names
        if not routed:
            return OTHER
        if len(self._models) >= MODEL_LABEL_LIMIT:
            if not self._full_logged:
                self._full_logged = True
                log.warning("metrics: %d model label values in use; further model names count as 'other'",
                            MODEL_LABEL_LIMIT)
            return OTHER
        self._models.add(name)
        return name

    def _listed_name(self, name: str) -> bool:
        """``name`` (or the base of ``name:variant``) is in the model list; the list is cached per revision."""
        rt = self.runtime
        snapshot, view = rt.snapshot, rt.discovery.view
        if self._listed is None or self._listed[0] is not snapshot or self._listed[1] is not view:
            self._listed = (snapshot, view, frozenset(m.id for m in list_models(snapshot, view)))
        ids = self._listed[2]
        if name in ids:
            return True
        base, sep, word = name.rpartition(":")
        return bool(sep) and word in VARIANTS and base in ids


def http_route(path: str, routes: Mapping[str, Any]) -> str:
    """The route label of ``path``: a route of the table, ``/v1/models/{model}``, ``/admin/*``, a file's or a
    batch's template, or ``other``."""
    if path in routes:
        return path
    if path.startswith(MODEL_ROUTE) and len(path) > len(MODEL_ROUTE):
        return MODEL_ROUTE + "{model}"
    if path.startswith(ANTHROPIC_MODEL_ROUTE) and len(path) > len(ANTHROPIC_MODEL_ROUTE):
        return ANTHROPIC_MODEL_ROUTE + "{model}"
    if path.startswith("/admin/"):
        return "/admin/*"
    if path.startswith(STORED_RESPONSE_ROUTE) and len(path) > len(STORED_RESPONSE_ROUTE):
        return STORED_RESPONSE_ROUTE + "{id}"   # and its /cancel, /input_items
    for pattern, label in ITEM_ROUTES:
        if pattern.fullmatch(path):
            return label
    return OTHER
