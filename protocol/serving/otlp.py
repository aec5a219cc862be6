"""``tracing.otlp``: every finished call's spans to an OpenTelemetry collector, off the event loop.

The TraceLog tells ``SpanExport.observe`` of each finished call (after the
metrics). ``observe`` decides sampling, builds the spans
(``otlp_spans.py``) and hands them to the SDK's ``BatchSpanProcessor``,
whose own thread batches them and posts them with the OTLP/HTTP exporter
(a blocking ``requests`` call: never on the Trio thread). Handing over is
an append to a bounded queue: a slow or unreachable collector never slows
or fails a call; what does not fit is dropped here and counted, and the
processor's thread alone waits on the network.

Sampling is decided once per trace, the same way in every worker and
instance: a client ``traceparent`` decides by its sampled flag (parent
based); a call that starts its trace (or came with ``x-trace-id`` only) is
kept when the trace id's low 64 bits fall under ``sampling_ratio`` of the
range, as OpenTelemetry's ``TraceIdRatioBased`` does.

Counters (read by ``/metrics`` at scrape time, ``store_metrics.OTLP``): spans handed
to the processor, dropped (queue full), exported, failed to export.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from switchyard.actors.events import CallTrace
from switchyard.actors.mcp.records import ToolCall
from switchyard.actors.trace import TraceContext, new_span_id
from switchyard.config.schema import Snapshot
from switchyard.config.telemetry import OtlpExport
from switchyard.protocol.serving.otlp_spans import backend_address, call_spans, tool_span

log = logging.getLogger("switchyard.tracing")

SCOPE = InstrumentationScope("switchyard")
BATCH = 512                   # spans per export request at most
ID_RANGE = 1 << 64            # the trace id's low 64 bits decide a ratio sample


class _HashedResource(Resource):
    """The export's Resource, hashed once.

    The SDK's encoder groups every span by its resource, and ``Resource``
    hashes by ``json.dumps`` of its attributes each time; a Resource is
    immutable, so its hash is taken once here.
    """

    def __init__(self, resource: Resource) -> None:
        super().__init__(resource.attributes, resource.schema_url)
        self._hash = super().__hash__()

    def __hash__(self) -> int:
        return self._hash


class _Counted(SpanExporter):
    """The real exporter, counting what its batches did (runs in the processor's thread)."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.taken = 0      # spans the processor took off its queue (written by its thread only)
        self.exported = 0
        self.failed = 0
        self.closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.taken += len(spans)
        try:
            result = self.inner.export(spans)
        except Exception:   # the processor would log it too; count it as the failure it is
            log.exception("OTLP export failed")
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.exported += len(spans)
        else:
            self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        if not self.closed:   # once: the SDK's processor calls it again after ours
            self.closed = True
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class SpanExport:
    """One Runtime's span export (the actors' ``CallSpans`` port)."""

    def __init__(self, config: OtlpExport, snapshot: Callable[[], Snapshot],
                 exporter: SpanExporter | None = None) -> None:
        self.config = config
        self.snapshot = snapshot   # the running revision: backend name -> URL, for server.address
        self.resource = _HashedResource(
            Resource.create({**dict(config.resource_attributes), "service.name": config.service_name}))
        inner = exporter or OTLPSpanExporter(endpoint=config.traces_url, headers=dict(config.headers),
                                             timeout=config.timeout)
        self.exporter = _Counted(inner)
        self.processor = BatchSpanProcessor(
            self.exporter, max_queue_size=config.max_queue_size, schedule_delay_millis=config.export_interval * 1000,
            max_export_batch_size=min(BATCH, config.max_queue_size), export_timeout_millis=config.timeout * 1000)
        self.bound = round(config.sampling_ratio * ID_RANGE)
        self.queued = 0
        self.dropped = 0
        self.unsampled = 0
        self._addresses: tuple[Snapshot, dict[str, tuple[str, int | None] | None]] | None = None

    @property
    def exported(self) -> int:
        return self.exporter.exported

    @property
    def failed(self) -> int:
        return self.exporter.failed

    def sampled(self, trace: CallTrace | TraceContext) -> bool:
        assert trace.trace_id is not None
        if trace.parent_id is not None and trace.flags is not None:
            return bool(int(trace.flags, 16) & 1)
        return int(trace.trace_id[16:], 16) < self.bound

    def observe(self, trace: CallTrace) -> None:
        """Export ``trace``'s spans if sampled; never waits (a full queue drops and counts)."""
        if trace.trace_id is None:   # tracing.enabled is false: the call has no trace
            return
        if not self.sampled(trace):
            self.unsampled += 1
            return
        spans = call_spans(trace, int(trace.span_id or new_span_id(), 16), self.resource, SCOPE, self._address)
        for span in spans:
            # What the processor's queue holds now is at most queued - taken (its thread counts a
            # batch after popping it), so this never overfills it: the SDK never drops on its own.
            if self.queued - self.exporter.taken >= self.config.max_queue_size:
                self.dropped += 1
                continue
            self.queued += 1
            self.processor.on_end(span)

    def observe_tool(self, call: ToolCall) -> None:
        """Export an MCP tool call's span if its trace is sampled; never waits (like ``observe``)."""
        if call.trace is None:
            return
        if not self.sampled(call.trace):
            self.unsampled += 1
            return
        self._queue(tool_span(call, self.resource, SCOPE))

    def _queue(self, span: ReadableSpan) -> None:
        if self.queued - self.exporter.taken >= self.config.max_queue_size:
            self.dropped += 1
            return
        self.queued += 1
        self.processor.on_end(span)

    def close(self) -> None:
        """Export what is queued within ``timeout``, then stop (blocking: run it in a worker thread).

        The SDK's flush has no deadline of its own, so it runs in a thread of
        its own that is waited for at most ``timeout``; then the exporter is
        shut, which fails whatever is left at once, and the processor stops.
        """
        flush = threading.Thread(target=self.processor.force_flush, name="switchyard-otlp-flush", daemon=True)
        flush.start()
        flush.join(self.config.timeout)
        self.exporter.shutdown()
        self.processor.shutdown()   # type: ignore[no-untyped-call]  # the SDK leaves this one unannotated

    def _address(self, backend: str) -> tuple[str, int | None] | None:
        snapshot = self.snapshot()
        if self._addresses is None or self._addresses[0] is not snapshot:
            self._addresses = (snapshot, {b.name: backend_address(b.url) for b in snapshot.backends})
        return self._addresses[1].get(backend)
